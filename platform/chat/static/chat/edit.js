/* Edit a sent message and send it again: the pencil under a user message opens its text in place;
 * sending it asks chat.js (a "pagoda:edit" event on the thread) to send an "edit" frame. The server
 * answers it as a new branch beside the message (chat/branches.py): the earlier message and its later
 * turns stay, reachable with "‹ i / n ›". Enter sends, Shift+Enter breaks the line, Escape cancels.
 */
(function () {
  "use strict";

  const configNode = document.getElementById("chat-config");
  const thread = document.querySelector("#messages .thread");
  if (!configNode || !thread) return;
  const T = JSON.parse(configNode.textContent).strings;

  function actionsOf(article) {
    let place = article.querySelector(".user-actions");
    if (!place) {
      place = document.createElement("div");
      place.className = "user-actions";
      article.append(place);
    }
    return place;
  }

  function attach(article) {
    if (!/^\d+$/.test(article.dataset.id || "") || article.querySelector(".edit-message")) return;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "icon edit-message";
    button.textContent = "\u270e";
    button.title = T.edit;
    button.setAttribute("aria-label", T.edit);
    actionsOf(article).append(button);
  }

  function close(article) {
    const form = article.querySelector(".edit-form");
    if (form) form.remove();
    article.querySelector(".msg-body").hidden = false;
    actionsOf(article).hidden = false;
  }

  function open(article) {
    if (article.querySelector(".edit-form")) return;
    const body = article.querySelector(".msg-body");
    const { form, area } = PagodaInlineForm({
      className: "edit-form", text: body.textContent, label: T.edit, hint: T.edit_hint,
      cancelLabel: T.cancel, submitLabel: T.edit_send, submitClass: "edit-send", enterSubmits: true,
      onCancel: () => close(article),
      onSubmit: (text) => {
        if (!text.trim()) return;
        close(article);
        thread.dispatchEvent(new CustomEvent("pagoda:edit", { detail: { article: article, text: text } }));
      },
    });
    area.rows = Math.min(10, Math.max(2, area.value.split("\n").length));
    body.hidden = true;
    actionsOf(article).hidden = true;
    body.after(form);
    area.focus();
    area.setSelectionRange(area.value.length, area.value.length);
  }

  thread.addEventListener("click", (event) => {
    const button = event.target.closest(".edit-message");
    if (button) open(button.closest(".msg-user"));
  });

  thread.querySelectorAll(".msg-user").forEach(attach);
  new MutationObserver((records) => {
    records.forEach((record) => {
      const target = record.target;
      if (record.type === "attributes" && target.classList.contains("msg-user")) attach(target);
      record.addedNodes.forEach((node) => {
        if (node.classList && node.classList.contains("msg-user")) attach(node);
      });
    });
  }).observe(thread, { childList: true, attributes: true, attributeFilter: ["data-id"], subtree: true });
})();
