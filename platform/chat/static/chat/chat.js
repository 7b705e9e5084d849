/* The chat page: one WebSocket to /ws/chat/<id>/ (frames: platform/chat/protocol.py), the thread,
 * the composer (send / stop / regenerate) and the sidebar's title of this conversation.
 * Text from people and the model goes into the page through textContent, or through
 * PagodaMarkdown.render, which escapes everything first.
 */
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("chat-config").textContent);
  const T = config.strings;
  const $ = (selector) => document.querySelector(selector);

  // --- on every chat page: confirm deletes, copy code --------------------------------------------
  document.querySelectorAll("form[data-confirm]").forEach((form) => {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  });

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    // Plain http on an intranet host is not a secure context: fall back to a hidden textarea.
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    try { document.execCommand("copy"); } finally { area.remove(); }
    return Promise.resolve();
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest(".copy-code");
    if (!button) return;
    const code = button.closest(".code-block").querySelector("code").textContent;
    copyText(code).then(() => {
      button.textContent = T.copied;
      button.classList.add("done");
      setTimeout(() => { button.textContent = T.copy; button.classList.remove("done"); }, 1500);
    });
  });

  if (!config.wsPath) return; // the welcome page: no conversation open

  const scroller = $("#messages");
  const thread = scroller.querySelector(".thread");
  const emptyHint = thread.querySelector(".empty-hint");
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

  let socket = null;
  let reconnectDelay = 1000;
  let closedForGood = false;
  let turn = null; // the reply being written: {reply, body, raw, user, replaced, started}
  let renderQueued = false;

  // --- rendering ------------------------------------------------------------------------------------
  function renderMarkdown(body, raw) {
    body.innerHTML = window.PagodaMarkdown.render(raw, { copyLabel: T.copy });
  }

  function setUsage(article, usage) {
    const span = article.querySelector(".usage");
    if (!span || !usage || !usage.completion_tokens) return;
    span.textContent = T.usage.replace("{prompt}", usage.prompt_tokens)
      .replace("{completion}", usage.completion_tokens).replace("{cached}", usage.cached_tokens);
  }

  function setBadge(article, status, errorText) {
    const meta = article.querySelector(".msg-meta");
    meta.querySelectorAll(".badge, .msg-error").forEach((el) => el.remove());
    article.dataset.status = status;
    if (status !== "stopped" && status !== "error") return;
    const badge = document.createElement("span");
    badge.className = "badge " + status;
    badge.textContent = status === "stopped" ? T.stopped : T.error;
    meta.prepend(badge);
    if (errorText) {
      const text = document.createElement("span");
      text.className = "msg-error";
      text.textContent = errorText;
      badge.after(" ", text);
    }
  }

  function messageElement(role) {
    const article = document.createElement("article");
    article.className = "msg msg-" + role;
    const who = document.createElement("div");
    who.className = "msg-role";
    who.textContent = role === "user" ? T.you : T.assistant;
    const body = document.createElement("div");
    body.className = "msg-body";
    article.append(who, body);
    if (role === "assistant") {
      const meta = document.createElement("div");
      meta.className = "msg-meta";
      const usage = document.createElement("span");
      usage.className = "usage";
      meta.append(usage);
      article.append(meta);
    }
    thread.insertBefore(article, emptyHint);
    emptyHint.hidden = true;
    return article;
  }

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
      renderMarkdown(turn.body, turn.raw);
      if (follow) scrollToBottom();
    });
  }

  // The replies already on the page arrive as escaped text; render them as Markdown.
  thread.querySelectorAll(".msg-assistant").forEach((article) => {
    const body = article.querySelector(".msg-body");
    renderMarkdown(body, body.textContent);
    setUsage(article, {
      prompt_tokens: article.dataset.promptTokens, completion_tokens: Number(article.dataset.completionTokens),
      cached_tokens: article.dataset.cachedTokens,
    });
  });
  thread.querySelectorAll(".msg-user .msg-body").forEach((body) => { body.classList.add("plain"); });
  scrollToBottom();

  // --- state of the composer ------------------------------------------------------------------------
  function lastOf(selector) {
    const all = thread.querySelectorAll(selector);
    return all.length ? all[all.length - 1] : null;
  }

  function updateControls() {
    const open = socket !== null && socket.readyState === WebSocket.OPEN;
    const busy = turn !== null;
    sendButton.hidden = busy;
    stopButton.hidden = !busy;
    sendButton.disabled = !open || !input.value.trim();
    regenerateButton.hidden = busy || !lastOf(".msg-user");
    regenerateButton.disabled = !open;
    const count = input.value.length;
    counter.textContent = count > config.maxChars * 0.8
      ? T.counter.replace("{count}", count.toLocaleString()).replace("{max}", config.maxChars.toLocaleString()) : "";
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
  function beginTurn(userText) {
    showNotice("");
    const replaced = userText === null ? lastReplyAfterLastUser() : null;
    let user = null;
    if (userText !== null) {
      user = messageElement("user");
      const body = user.querySelector(".msg-body");
      body.classList.add("plain");
      body.textContent = userText;
    }
    if (replaced) replaced.hidden = true; // shown again if the server refuses the regenerate
    const reply = messageElement("assistant");
    reply.classList.add("streaming");
    reply.dataset.status = "pending";
    const body = reply.querySelector(".msg-body");
    body.innerHTML = '<span class="typing" aria-label=""><i></i><i></i><i></i></span>';
    body.firstChild.setAttribute("aria-label", T.generating);
    turn = { reply: reply, body: body, raw: "", user: user, replaced: replaced, userText: userText, started: false };
    scrollToBottom();
    updateControls();
  }

  function lastReplyAfterLastUser() {
    const tail = lastOf(".msg:not([hidden])");
    return tail && tail.classList.contains("msg-assistant") ? tail : null;
  }

  function endTurn() {
    if (turn) {
      turn.reply.classList.remove("streaming");
      if (turn.replaced && turn.started) turn.replaced.remove();
    }
    turn = null;
    updateControls();
  }

  // The server refused the turn before saving anything: take it back off the page.
  function undoTurn() {
    if (!turn) return;
    turn.reply.remove();
    if (turn.user) turn.user.remove();
    if (turn.replaced) turn.replaced.hidden = false;
    if (turn.userText !== null && !input.value) { input.value = turn.userText; autosize(); }
    emptyHint.hidden = thread.querySelector(".msg") !== null;
    turn = null;
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

  function updateSidebar(text) {
    const list = $("#conversation-list");
    let item = list.querySelector('li[data-id="' + config.conversationId + '"]');
    if (!item) { // the first message of a new conversation: add it on top
      list.querySelectorAll("li.none").forEach((el) => el.remove());
      item = document.createElement("li");
      item.dataset.id = config.conversationId;
      const link = document.createElement("a");
      link.href = location.pathname;
      item.append(link);
      list.prepend(item);
    }
    list.querySelectorAll("li.active").forEach((el) => el.classList.remove("active"));
    item.classList.add("active");
    const link = item.querySelector("a");
    if (link.firstChild && link.firstChild.nodeType === Node.TEXT_NODE) link.firstChild.textContent = text;
    else link.prepend(text);
    link.title = text;
  }

  function onFrame(frame) {
    switch (frame.type) {
      case "start":
        if (!turn) return;
        turn.started = true;
        turn.reply.dataset.id = frame.message_id;
        if (turn.user && frame.user_message_id) turn.user.dataset.id = frame.user_message_id;
        if (frame.title) {
          title.textContent = frame.title;
          document.title = frame.title + " · Pagoda";
          updateSidebar(frame.title);
        }
        break;
      case "delta":
        if (!turn) return;
        turn.raw += frame.text;
        queueRender();
        break;
      case "done":
        if (!turn) return;
        renderMarkdown(turn.body, turn.raw);
        setBadge(turn.reply, frame.status);
        setUsage(turn.reply, frame.usage);
        endTurn();
        break;
      case "error": {
        const text = T["error_" + frame.code] || frame.message;
        if (turn && !turn.started) undoTurn();
        else if (turn && frame.message_id) { // the reply was saved as failed
          renderMarkdown(turn.body, turn.raw);
          setBadge(turn.reply, "error", text);
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
        if (turn.started) { renderMarkdown(turn.body, turn.raw); setBadge(turn.reply, "stopped"); endTurn(); }
        else undoTurn();
      }
      const reason = T["closed_" + event.code];
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
    if (!text.trim() || turn) return;
    if (!send({ type: "user_message", content: text, profile: profile() })) return;
    input.value = "";
    autosize();
    beginTurn(text);
  });

  input.addEventListener("keydown", (event) => {
    // Enter sends; Shift+Enter breaks the line. Never while an IME (Korean) is still composing.
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  input.addEventListener("input", () => { autosize(); updateControls(); });

  stopButton.addEventListener("click", () => { send({ type: "stop" }); });

  regenerateButton.addEventListener("click", () => {
    if (turn || !lastOf(".msg-user")) return;
    if (send({ type: "regenerate", profile: profile() })) beginTurn(null);
  });

  // Leaving the page closes the socket, and the server stops the reply (and saves what it had).
  window.addEventListener("pagehide", () => { closedForGood = true; if (socket) socket.close(1000); });

  connect();
  updateControls();
})();
