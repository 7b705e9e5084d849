/* Following a reply that another tab of this conversation is writing (frames marked "followed", see
 * platform/chat/follow.py): its user message and its reply appear here and stream as they do there.
 * While it runs this page offers Stop (the server passes it to the tab writing the reply), not Send.
 * A page opened mid-reply gets one "snapshot" frame (the reply so far, and "seq": how many deltas it
 * covers) and then streams on from there; a delta whose seq is not past the reply's is already shown.
 * Without a snapshot (the writing tab unreachable) it fills the reply's row in when it ends.
 *
 *   const following = PagodaFollow.create({view, thread, strings, onChange, render, scrollToBottom});
 *   following.onFrame(frame); following.busy()
 */
(function () {
  "use strict";

  function create(options) {
    const view = options.view;
    const thread = options.thread;
    let reply = null; // {article, body, raw}

    function articleOf(messageId) {
      return thread.querySelector('.msg-assistant[data-id="' + messageId + '"]');
    }

    // A page that missed the start (opened mid-reply) follows the reply's row from the page, if shown.
    function current(frame) {
      if (reply && reply.article.dataset.id === String(frame.message_id)) return reply;
      const article = articleOf(frame.message_id);
      if (!article) return null;
      reply = { article: article, body: article.querySelector(".msg-body"), raw: "", late: true, seq: 0 };
      article.classList.add("streaming");
      return reply;
    }

    // Placed in the conversation's tree (branches.js) by data-parent, as the server saved them.
    function start(frame) {
      const parent = frame.parent_id === null || frame.parent_id === undefined ? "" : String(frame.parent_id);
      let replyParent = parent; // a regenerated reply answers that user message again
      if (frame.user_content !== null && frame.user_content !== undefined) {
        const user = view.messageElement("user");
        user.dataset.id = frame.user_message_id;
        user.dataset.parent = parent;
        user.querySelector(".msg-body").textContent = frame.user_content;
        window.PagodaAttachments.renderChips(user, frame.attachments);
        replyParent = String(frame.user_message_id);
      }
      thread.querySelectorAll(".continue").forEach((button) => button.remove());
      const article = view.messageElement("assistant");
      article.dataset.id = frame.message_id;
      article.dataset.parent = replyParent;
      article.dataset.status = "pending";
      article.classList.add("streaming", "followed");
      reply = { article: article, body: article.querySelector(".msg-body"), raw: "", late: false, seq: 0 };
      reply.body.textContent = options.strings.other_tab;
      if (frame.title) view.updateSidebar(frame.title);
      view.refreshVersions(); // the newest branch, this one, is shown
      options.scrollToBottom();
    }

    // The reply so far: on its row if the page shows it (saved before the page was made), else as a start.
    function snapshot(frame) {
      const article = articleOf(frame.message_id);
      if (article) {
        article.dataset.status = "pending";
        article.classList.add("streaming", "followed");
        reply = { article: article, body: article.querySelector(".msg-body"), raw: "", late: false, seq: 0 };
      } else {
        start(frame);
      }
      reply.raw = frame.content;
      reply.seq = frame.seq;
      if (reply.raw) options.render(reply.body, reply.raw);
      else reply.body.textContent = options.strings.other_tab;
    }

    function end(frame) {
      const followed = current(frame);
      if (!followed) return;
      followed.raw = typeof frame.content === "string" ? frame.content : followed.raw;
      view.renderMarkdown(followed.body, followed.raw);
      followed.article.classList.remove("streaming");
      if (frame.type === "done") {
        view.setBadge(followed.article, frame.status, undefined, frame.finish_reason);
        view.setUsage(followed.article, frame.usage);
      } else {
        view.setBadge(followed.article, "error", frame.message);
      }
      reply = null;
      view.refreshVersions();
    }

    function onFrame(frame) {
      if (frame.type === "start") start(frame);
      else if (frame.type === "snapshot") snapshot(frame);
      else if (frame.type === "delta") {
        const followed = current(frame);
        if (!followed || followed.late) { options.onChange(); return; } // late: its beginning is missing
        if (typeof frame.seq === "number") {
          if (frame.seq <= followed.seq) { options.onChange(); return; } // the snapshot had it
          followed.seq = frame.seq;
        }
        followed.raw += frame.text;
        options.render(followed.body, followed.raw);
      } else if (frame.type === "done" || frame.type === "error") end(frame);
      options.onChange();
    }

    return { onFrame: onFrame, busy: () => reply !== null };
  }

  window.PagodaFollow = { create: create };
})();
