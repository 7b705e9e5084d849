/* Thumbs up / down, with an optional comment, under every finished reply of the assistant:
 * POST /chat/<id>/messages/<message_id>/feedback/ (rating=up|down|"" to take it back, comment=...).
 * A reply streamed on this page gets its buttons when its status turns complete or stopped (a
 * MutationObserver: chat.js needs no hook). Text goes in through textContent only.
 *
 *   <article class="msg msg-assistant" data-id="12" data-status="complete" data-feedback="up"
 *            data-feedback-comment="...">   (templates/chat/_message.html)
 */
(function () {
  "use strict";

  const configNode = document.getElementById("chat-config");
  const config = configNode ? JSON.parse(configNode.textContent) : {};
  const thread = document.querySelector("#messages .thread");
  if (!thread || !config.feedbackUrl) return;
  const T = config.strings;
  const RATEABLE = ["complete", "stopped"];
  const SVG = "http://www.w3.org/2000/svg";
  const THUMB = "M2 10h4v11H2z M8 10.5 11.5 3c1.7 0 3 1.2 3 3v3.5H20a2 2 0 0 1 2 2.3l-1.3 7.5a2 2 0 0 1-2 1.7H8z";

  function urlFor(article) {
    return config.feedbackUrl.replace(/\/0\/feedback\/$/, "/" + article.dataset.id + "/feedback/");
  }

  function csrfToken() {
    const field = document.querySelector("[name=csrfmiddlewaretoken]");
    return field ? field.value : "";
  }

  function post(article, rating, comment) {
    return fetch(urlFor(article), {
      method: "POST", credentials: "same-origin", body: new URLSearchParams({ rating: rating, comment: comment }),
      headers: { "Accept": "application/json", "X-CSRFToken": csrfToken() },
    }).then((response) => response.json().then((data) => {
      if (!response.ok) throw new Error((data.error && data.error.message) || T.error);
      return data;
    }));
  }

  function thumb(kind) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "icon thumb thumb-" + kind;
    button.dataset.rating = kind;
    const label = kind === "up" ? T.feedback_up : T.feedback_down;
    button.title = label;
    button.setAttribute("aria-label", label);
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("aria-hidden", "true");
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", THUMB);
    svg.append(path);
    button.append(svg);
    return button;
  }

  // Reflect the saved rating: the pressed thumb, and the comment button once there is a rating.
  function show(article) {
    const box = article.querySelector(".feedback");
    const rating = article.dataset.feedback || "";
    box.querySelectorAll(".thumb").forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.rating === rating)));
    const commentButton = box.querySelector(".feedback-comment");
    commentButton.hidden = !rating;
    const comment = article.dataset.feedbackComment || "";
    commentButton.textContent = comment ? T.feedback_edit_comment : T.feedback_comment;
    commentButton.title = comment;
  }

  function closeForm(article) {
    const form = article.querySelector(".feedback-form");
    if (form) form.remove();
  }

  function save(article, rating, comment) {
    const status = article.querySelector(".feedback-status");
    return post(article, rating, comment).then((data) => {
      article.dataset.feedback = data.rating || "";
      article.dataset.feedbackComment = data.comment || "";
      status.textContent = data.rating ? T.feedback_thanks : "";
      clearTimeout(status.timer);
      status.timer = setTimeout(() => { status.textContent = ""; }, 4000);
      show(article);
      return data;
    }).catch((error) => { status.textContent = error.message; throw error; });
  }

  // An inline form under the reply: a comment for the rating given (optional; Escape or Cancel closes it).
  function openForm(article) {
    closeForm(article);
    const { form, area } = PagodaInlineForm({
      className: "feedback-form", text: article.dataset.feedbackComment, maxLength: 2000,
      placeholder: T.feedback_placeholder, label: T.feedback_comment,
      cancelLabel: T.cancel, submitLabel: T.feedback_save,
      onCancel: () => closeForm(article),
      onSubmit: (text) => save(article, article.dataset.feedback, text).then(() => closeForm(article), () => {}),
    });
    article.querySelector(".msg-meta").after(form);
    area.focus();
  }

  function attach(article) {
    if (article.querySelector(".feedback") || !article.dataset.id || !RATEABLE.includes(article.dataset.status)) return;
    const box = document.createElement("span");
    box.className = "feedback";
    const commentButton = document.createElement("button");
    commentButton.type = "button";
    commentButton.className = "link feedback-comment";
    const status = document.createElement("span");
    status.className = "feedback-status";
    status.setAttribute("role", "status");
    box.append(thumb("up"), thumb("down"), commentButton, status);
    article.querySelector(".msg-meta").append(box);
    show(article);
  }

  thread.addEventListener("click", (event) => {
    const article = event.target.closest(".msg-assistant");
    if (!article) return;
    const button = event.target.closest(".thumb");
    if (button) {
      const rating = article.dataset.feedback === button.dataset.rating ? "" : button.dataset.rating; // again: take back
      const comment = rating ? article.dataset.feedbackComment || "" : "";
      save(article, rating, comment).then((data) => {
        if (data.rating === "down" && !data.comment) openForm(article); // say what was wrong, if you like
        if (!data.rating) closeForm(article);
      }, () => {});
    } else if (event.target.closest(".feedback-comment")) {
      openForm(article);
    }
  });

  thread.querySelectorAll(".msg-assistant").forEach(attach);
  new MutationObserver((records) => {
    records.forEach((record) => {
      if (record.target.classList && record.target.classList.contains("msg-assistant")) attach(record.target);
    });
  }).observe(thread, { subtree: true, attributes: true, attributeFilter: ["data-status", "data-id"] });
})();
