/* An inline form in a message: a textarea, an optional hint, Cancel and a submit button. Escape or
 * Cancel calls onCancel; submitting (or Enter, with enterSubmits) calls onSubmit(text). Used by the edit form (edit.js) and the
 * feedback comment (feedback.js). Text goes in through value and textContent only.
 *
 *   const { form, area } = PagodaInlineForm({ className: "edit-form", text: "...", label: "...",
 *     submitLabel: "...", cancelLabel: "...", onSubmit: (text) => ..., onCancel: () => ... });
 */
(function () {
  "use strict";

  window.PagodaInlineForm = function inlineForm(options) {
    const form = document.createElement("form");
    form.className = options.className;
    const area = document.createElement("textarea");
    area.value = options.text || "";
    area.rows = options.rows || 2;
    if (options.maxLength) area.maxLength = options.maxLength;
    if (options.placeholder) area.placeholder = options.placeholder;
    area.setAttribute("aria-label", options.label);
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.className = "secondary";
    cancel.textContent = options.cancelLabel;
    const submit = document.createElement("button");
    submit.type = "submit";
    if (options.submitClass) submit.className = options.submitClass;
    submit.textContent = options.submitLabel;
    const actions = document.createElement("div");
    actions.className = options.className + "-actions";
    actions.append(cancel, submit);
    form.append(area);
    if (options.hint) {
      const hint = document.createElement("span");
      hint.className = options.className.replace(/-form$/, "-hint");
      hint.textContent = options.hint;
      form.append(hint);
    }
    form.append(actions);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      options.onSubmit(area.value);
    });
    cancel.addEventListener("click", options.onCancel);
    area.addEventListener("keydown", (event) => {
      if (event.key === "Escape") { event.stopPropagation(); options.onCancel(); }
      // Enter sends where asked, except while an IME composes (Korean: the Enter that ends a syllable).
      if (options.enterSubmits && event.key === "Enter" && !event.shiftKey && !event.isComposing &&
          event.keyCode !== 229) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    return { form: form, area: area };
  };
})();
