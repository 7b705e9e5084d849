/* The chat page's conversation: one WebSocket to /ws/chat/<id>/ (frames: platform/chat/protocol.py),
 * the reply being written (its deltas rendered as they arrive), and the composer: send, stop,
 * regenerate. The DOM of messages and the sidebar is thread.js's.
 */
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("chat-config").textContent);
  const T = config.strings;
  // Error codes sent just before the server closes the socket because the user's access ended.
  const ACCESS_ENDED = ["signed_out", "access_revoked", "conversation_gone"];
  const $ = (selector) => document.querySelector(selector);

  window.PagodaThread.installPageBehaviour(T);
  if (!config.wsPath) return; // the welcome page: no conversation open

  const scroller = $("#messages");
  const thread = scroller.querySelector(".thread");
  const view = window.PagodaThread.create({ thread: thread, strings: T, conversationId: config.conversationId });
  const form = $("#composer");
  const input = $("#input");
  const sendButton = $("#send");
  const stopButton = $("#stop");
  const regenerateButton = $("#regenerate");
  const profileSelect = $("#profile");
  const statusLabel = $("#status");
  const notice = $("#notice");
  const title = $("#chat-title");
  const counter = $("#counter");
  // Files attached to the next message (attachments.js).
  const files = window.PagodaAttachments.create({
    input: $("#attach-input"), list: $("#attachment-list"), uploadUrl: config.attachUrl, strings: T,
    onChange: () => updateControls(), showNotice: (text) => showNotice(text),
  });
  // The reply another tab of this conversation is writing, followed here (follow.js).
  const following = window.PagodaFollow.create({
    view: view, thread: thread, strings: T, onChange: () => updateControls(), scrollToBottom: scrollToBottom,
    render: (body, raw) => { const follow = nearBottom(); view.renderMarkdown(body, raw); if (follow) scrollToBottom(); },
  });

  let socket = null;
  let reconnectDelay = 1000;
  let closedForGood = false;
  let accessNotice = ""; // why the server is about to close the socket (an access-ended error frame)
  let turn = null; // the reply being written: {reply, body, raw, user, replaced, started}
  let renderQueued = false;

  function nearBottom() {
    return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;
  }

  function scrollToBottom() {
    scroller.scrollTop = scroller.scrollHeight;
  }

  function queueRender() {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(() => {
      renderQueued = false;
      if (!turn) return;
      const follow = nearBottom();
      view.renderMarkdown(turn.body, turn.raw);
      if (follow) scrollToBottom();
    });
  }
  scrollToBottom();

  // --- state of the composer ------------------------------------------------------------------------
  function updateControls() {
    const open = socket !== null && socket.readyState === WebSocket.OPEN;
    const busy = turn !== null || following.busy();
    sendButton.hidden = busy;
    stopButton.hidden = !busy;
    const count = input.value.length;
    const over = count > config.maxChars;
    sendButton.disabled = !open || (!input.value.trim() && !files.ids().length) || over || files.busy();
    regenerateButton.hidden = busy || !view.lastOf(".msg-user");
    regenerateButton.disabled = !open;
    counter.textContent = count > config.maxChars * 0.8
      ? T.counter.replace("{count}", count.toLocaleString()).replace("{max}", config.maxChars.toLocaleString()) : "";
    counter.classList.toggle("over", over);
    thread.querySelectorAll(".continue").forEach((button) => { button.disabled = !open || busy; });
  }

  function limitText(template, count) {
    return template.replace("{count}", count.toLocaleString()).replace("{max}", config.maxChars.toLocaleString());
  }

  function showNotice(text) {
    notice.textContent = text;
    notice.hidden = !text;
  }

  function setStatus(state) {
    statusLabel.dataset.state = state;
    statusLabel.textContent = T[state] || state;
  }

  function autosize() {
    input.style.height = "auto";
    input.style.height = Math.min(input.scrollHeight, 240) + "px";
  }

  // --- a turn -----------------------------------------------------------------------------------------
  // The id of the message shown last (the new turn goes on after it), or undefined before any.
  function shownId(selector) {
    const article = view.lastOf(selector + ":not([hidden])");
    return article && /^\d+$/.test(article.dataset.id || "") ? Number(article.dataset.id) : undefined;
  }

  // userParent: the id the new user message follows (an edit: the edited message's parent; "" for none);
  // by default the message shown last. A regenerated reply (userText null) follows the last user message.
  function beginTurn(userText, userParent, sentFiles) {
    showNotice("");
    const continues = Array.from(thread.querySelectorAll(".continue")); // only the newest reply continues
    continues.forEach((button) => { button.hidden = true; });
    const replaced = userText === null ? lastReplyAfterLastUser() : null;
    let user = null;
    const tip = shownId(".msg");
    const answered = shownId(".msg-user");
    if (userText !== null) {
      user = view.messageElement("user");
      user.querySelector(".msg-body").textContent = userText;
      user.dataset.id = "new"; // named by the start frame
      user.dataset.parent = userParent !== undefined ? userParent : (tip || "");
      window.PagodaAttachments.renderChips(user, sentFiles);
    }
    if (replaced) replaced.hidden = true; // shown again if the server refuses the regenerate
    const reply = view.messageElement("assistant");
    reply.dataset.parent = user ? "new" : (answered || "");
    reply.classList.add("streaming");
    reply.dataset.status = "pending";
    const body = reply.querySelector(".msg-body");
    body.innerHTML = '<span class="typing" aria-label=""><i></i><i></i><i></i></span>';
    body.firstChild.setAttribute("aria-label", T.generating);
    turn = { reply: reply, body: body, raw: "", user: user, replaced: replaced, userText: userText, started: false,
             continues: continues, edit: userParent !== undefined, files: sentFiles || [] };
    view.refreshVersions(); // the new turn's branch is the one shown
    scrollToBottom();
    updateControls();
  }

  function lastReplyAfterLastUser() {
    const tail = view.lastOf(".msg:not([hidden])");
    return tail && tail.classList.contains("msg-assistant") ? tail : null;
  }

  function endTurn() {
    if (turn) {
      turn.reply.classList.remove("streaming");
      if (turn.replaced && turn.started) turn.replaced.dataset.earlierVersion = "true"; // kept, hidden: ‹ i / n ›
      if (turn.started) turn.continues.forEach((button) => button.remove());
      else turn.continues.forEach((button) => { button.hidden = false; });
    }
    turn = null;
    view.refreshVersions();
    updateControls();
  }

  // The server refused the turn before saving anything: take it back off the page.
  function undoTurn() {
    if (!turn) return;
    turn.reply.remove();
    if (turn.user) turn.user.remove();
    if (turn.replaced) turn.replaced.hidden = false;
    turn.continues.forEach((button) => { button.hidden = false; });
    if (turn.userText !== null && !turn.edit && !input.value) { input.value = turn.userText; autosize(); }
    if (turn.files.length) files.restore(turn.files); // still drafts: the server saved nothing
    view.refreshEmptyHint();
    turn = null;
    view.refreshVersions();
    updateControls();
  }

  function send(frame) {
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      showNotice(T.reconnecting);
      return false;
    }
    socket.send(JSON.stringify(frame));
    return true;
  }

  function profile() {
    return profileSelect ? profileSelect.value : undefined;
  }

  function onFrame(frame) {
    if (frame.followed) { following.onFrame(frame); return; }
    switch (frame.type) {
      case "start":
        if (!turn) return;
        turn.started = true;
        turn.reply.dataset.id = frame.message_id;
        if (turn.user && frame.user_message_id) {
          turn.user.dataset.id = frame.user_message_id;
          turn.reply.dataset.parent = frame.user_message_id;
        }
        if (frame.title) {
          title.textContent = frame.title;
          document.title = frame.title + " · Pagoda";
          view.updateSidebar(frame.title);
        }
        break;
      case "delta":
        if (!turn) return;
        turn.raw += frame.text;
        queueRender();
        break;
      case "done":
        if (!turn) return;
        view.renderMarkdown(turn.body, turn.raw);
        view.setBadge(turn.reply, frame.status, undefined, frame.finish_reason);
        view.setUsage(turn.reply, frame.usage);
        endTurn();
        break;
      case "budget_warning": // a token budget is 80% spent: said, and the turn goes on
        showNotice(frame.message);
        break;
      case "error": {
        const text = T["error_" + frame.code] || frame.message;
        if (ACCESS_ENDED.includes(frame.code)) accessNotice = text;
        if (turn && !turn.started) undoTurn();
        else if (turn && frame.message_id) { // the reply was saved as failed
          view.renderMarkdown(turn.body, turn.raw);
          view.setBadge(turn.reply, "error", text);
          endTurn();
        }
        showNotice(text);
        break;
      }
    }
  }

  // --- the socket -------------------------------------------------------------------------------------
  function connect() {
    setStatus("connecting");
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + config.wsPath);
    socket.addEventListener("open", () => {
      setStatus("connected");
      reconnectDelay = 1000;
      showNotice("");
      updateControls();
    });
    socket.addEventListener("message", (event) => {
      let frame;
      try { frame = JSON.parse(event.data); } catch (e) { return; }
      onFrame(frame);
    });
    socket.addEventListener("close", (event) => {
      socket = null;
      if (turn) { // the server saved what it had as stopped
        if (turn.started) { view.renderMarkdown(turn.body, turn.raw); view.setBadge(turn.reply, "stopped"); endTurn(); }
        else undoTurn();
      }
      const reason = accessNotice || T["closed_" + event.code];
      if (reason) {
        closedForGood = true;
        setStatus("error");
        statusLabel.textContent = T.error;
        showNotice(reason);
        if (event.code === 4401) setTimeout(() => location.assign(config.loginUrl), 1500);
      } else if (!closedForGood) {
        setStatus("reconnecting");
        setTimeout(connect, reconnectDelay);
        reconnectDelay = Math.min(reconnectDelay * 2, 15000);
      }
      updateControls();
    });
  }

  // --- the composer ---------------------------------------------------------------------------------
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value;
    if ((!text.trim() && !files.ids().length) || files.busy() || turn || following.busy()) return;
    if (text.length > config.maxChars) { showNotice(limitText(T.too_long, text.length)); return; }
    if (!send({ type: "user_message", content: text, profile: profile(), parent_id: shownId(".msg"),
                attachments: files.ids() })) return;
    input.value = "";
    autosize();
    beginTurn(text, undefined, files.take());
  });

  input.addEventListener("keydown", (event) => {
    // Enter sends; Shift+Enter breaks the line. Never while an IME (Korean) is still composing.
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  input.addEventListener("input", () => { autosize(); updateControls(); });

  // A paste that would take the message over the limit is refused whole and said so, never cut.
  input.addEventListener("paste", (event) => {
    const pasted = (event.clipboardData || window.clipboardData).getData("text");
    const selected = input.selectionEnd - input.selectionStart;
    const total = input.value.length - selected + pasted.length;
    if (total <= config.maxChars) return;
    event.preventDefault();
    showNotice(limitText(T.paste_too_long, total));
  });

  // "Continue" under a reply cut by the token limit asks the model for the rest, as a new turn.
  thread.addEventListener("click", (event) => {
    if (!event.target.closest(".continue") || turn) return;
    if (send({ type: "user_message", content: T.continue_prompt, profile: profile(), parent_id: shownId(".msg") })) {
      beginTurn(T.continue_prompt);
    }
  });

  // edit.js: a sent message, edited, goes again as a new branch beside it (the old one stays, ‹ i / n ›).
  thread.addEventListener("pagoda:edit", (event) => {
    const article = event.detail.article;
    const text = event.detail.text;
    if (turn) { showNotice(T.error_busy); return; }
    if (text.length > config.maxChars) { showNotice(limitText(T.too_long, text.length)); return; }
    if (send({ type: "edit", message_id: Number(article.dataset.id), content: text, profile: profile() })) {
      beginTurn(text, article.dataset.parent || "");
    }
  });

  stopButton.addEventListener("click", () => { send({ type: "stop" }); });

  regenerateButton.addEventListener("click", () => {
    if (turn || !view.lastOf(".msg-user")) return;
    if (send({ type: "regenerate", profile: profile(), message_id: shownId(".msg-user") })) beginTurn(null);
  });

  // Leaving the page closes the socket, and the server stops the reply (and saves what it had).
  window.addEventListener("pagehide", () => { closedForGood = true; if (socket) socket.close(1000); });

  connect();
  updateControls();
})();
