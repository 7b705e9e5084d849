/* The chat page's DOM: message elements, badges and usage lines, the sidebar entry of this
 * conversation, and the page-wide behaviours (confirm before delete, copy buttons on code).
 * Text from people and the model goes in through textContent, or PagodaMarkdown.render (which
 * escapes everything first).
 *
 *   const view = PagodaThread.create({thread, strings, conversationId});
 *   view.messageElement("assistant"); view.setBadge(article, "stopped"); view.renderMarkdown(body, raw)
 */
(function () {
  "use strict";

  function confirmBeforeSubmit(form) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }

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

  // Page-wide: every delete form asks first, every code block's button copies its code.
  function installPageBehaviour(T) {
    window.PagodaSidebar.install(T);
    document.querySelectorAll("form[data-confirm]").forEach(confirmBeforeSubmit);
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
  }

  const AUTO_DETECT_MAX_CHARS = 20000; // guessing the language of a huge block costs more than it gives
  const AUTO_DETECT_MIN_RELEVANCE = 5; // below this highlight.js is guessing

  // Colour the code blocks of a rendered reply with highlight.js (vendored; absent: left plain). Its output
  // escapes the code, which it reads back from textContent. A block whose fence is still open (the reply
  // streams) waits until it closes, so the colours do not jump while it grows.
  function highlight(body) {
    const hljs = window.hljs;
    if (!hljs) return;
    body.querySelectorAll(".code-block:not(.open) pre code").forEach((code) => {
      const text = code.textContent;
      const named = (code.className.match(/(?:^|\s)language-([A-Za-z0-9_#+.-]+)/) || [])[1];
      let result = null;
      if (named && hljs.getLanguage(named)) {
        result = hljs.highlight(text, { language: named, ignoreIllegals: true });
      } else if (!named && text.length <= AUTO_DETECT_MAX_CHARS) {
        const guess = hljs.highlightAuto(text);
        if (guess.relevance >= AUTO_DETECT_MIN_RELEVANCE) result = guess;
      }
      if (result === null) return;
      code.innerHTML = result.value;
      code.classList.add("hljs");
    });
  }

  function create(options) {
    const T = options.strings;
    const thread = options.thread;
    const emptyHint = thread.querySelector(".empty-hint");

    function renderMarkdown(body, raw) {
      body.innerHTML = window.PagodaMarkdown.render(raw, { copyLabel: T.copy });
      highlight(body);
      if (window.PagodaMath) window.PagodaMath.typeset(body);
    }

    function setUsage(article, usage) {
      const span = article.querySelector(".usage");
      if (!span || !usage || !Number(usage.completion_tokens)) return;
      span.textContent = T.usage.replace("{prompt}", usage.prompt_tokens)
        .replace("{completion}", usage.completion_tokens).replace("{cached}", usage.cached_tokens);
    }

    // A reply cut by the token limit: a badge, and (on the newest reply) a button that asks for the rest.
    function setLengthCut(article, offerContinue) {
      const meta = article.querySelector(".msg-meta");
      meta.querySelectorAll(".badge.length, .continue").forEach((el) => el.remove());
      const badge = document.createElement("span");
      badge.className = "badge length";
      badge.textContent = T.cut_by_length;
      meta.prepend(badge);
      if (!offerContinue) return;
      const button = document.createElement("button");
      button.type = "button";
      button.className = "secondary continue";
      button.textContent = T.continue;
      badge.after(button);
    }

    function setBadge(article, status, errorText, finishReason) {
      const meta = article.querySelector(".msg-meta");
      meta.querySelectorAll(".badge, .msg-error, .continue").forEach((el) => el.remove()); // not .versions
      article.dataset.status = status;
      article.dataset.finishReason = finishReason || "";
      if (status === "complete" && finishReason === "length") setLengthCut(article, true);
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

    // A new message at the end of the thread, shaped like templates/chat/_message.html.
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

    // Regenerated replies and edited messages: the branch shown, and "‹ i / n ›" (branches.js).
    const branches = window.PagodaBranches.create(thread, T);
    const refreshVersions = branches.refresh;

    function lastOf(selector) {
      const all = thread.querySelectorAll(selector);
      return all.length ? all[all.length - 1] : null;
    }

    function refreshEmptyHint() {
      emptyHint.hidden = thread.querySelector(".msg") !== null;
    }

    // The sidebar's delete button for a conversation that got its first message on this page.
    function deleteForm() {
      const form = document.createElement("form");
      form.method = "post";
      form.action = location.pathname + "delete/";
      form.dataset.confirm = T.confirm_delete;
      const token = document.createElement("input");
      token.type = "hidden";
      token.name = "csrfmiddlewaretoken";
      token.value = document.querySelector("#new-chat [name=csrfmiddlewaretoken]").value;
      const button = document.createElement("button");
      button.type = "submit";
      button.className = "icon delete";
      button.title = T.delete;
      button.setAttribute("aria-label", T.delete);
      button.textContent = "\u00d7";
      form.append(token, button);
      confirmBeforeSubmit(form);
      return form;
    }

    // This conversation's sidebar entry shows `title` (added on top after its first message).
    function updateSidebar(title) {
      const list = document.querySelector("#conversation-list");
      let item = list.querySelector('li[data-id="' + options.conversationId + '"]');
      if (!item) {
        list.querySelectorAll("li.none").forEach((el) => el.remove());
        item = document.createElement("li");
        item.dataset.id = options.conversationId;
        const link = document.createElement("a");
        link.href = location.pathname;
        const title = document.createElement("span");
        title.className = "conv-title";
        link.append(title);
        const actions = document.createElement("span");
        actions.className = "item-actions";
        actions.append(deleteForm());
        item.append(link, actions);
        list.prepend(item);
      }
      list.querySelectorAll("li.active").forEach((el) => el.classList.remove("active"));
      item.classList.add("active");
      const link = item.querySelector("a");
      link.querySelector(".conv-title").textContent = title;
      link.title = title;
    }

    // The replies already on the page arrive as escaped text: render them as Markdown.
    thread.querySelectorAll(".msg-assistant").forEach((article) => {
      const body = article.querySelector(".msg-body");
      renderMarkdown(body, body.textContent);
      if (article.dataset.status === "complete" && article.dataset.finishReason === "length") {
        setLengthCut(article, article === lastOf(".msg")); // only the newest reply continues
      }
      setUsage(article, {
        prompt_tokens: article.dataset.promptTokens, completion_tokens: article.dataset.completionTokens,
        cached_tokens: article.dataset.cachedTokens,
      });
    });

    refreshVersions();

    return {
      refreshVersions: refreshVersions, renderMarkdown: renderMarkdown, setUsage: setUsage, setBadge: setBadge, messageElement: messageElement,
      lastOf: lastOf, refreshEmptyHint: refreshEmptyHint, updateSidebar: updateSidebar,
    };
  }

  window.PagodaThread = { create: create, installPageBehaviour: installPageBehaviour };
})();
