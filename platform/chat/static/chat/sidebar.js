/* The chat page's sidebar: the phone drawer (menu button), rename (a prompt, then POST
 * /chat/<id>/rename/), search (GET /chat/search/?q= as JSON, Ctrl+K). Pin, export and delete are
 * plain forms and links of templates/chat/page.html. Text goes in through textContent only.
 *
 *   PagodaSidebar.install(strings)
 */
(function () {
  "use strict";

  // Phones: the menu button opens the sidebar as a drawer; the backdrop, Escape or a link closes it.
  function installDrawer() {
    const buttons = document.querySelectorAll(".menu-button");
    const setOpen = (open) => {
      document.body.classList.toggle("sidebar-open", open);
      buttons.forEach((b) => b.setAttribute("aria-expanded", String(open)));
    };
    buttons.forEach((b) => b.addEventListener("click", () => setOpen(!document.body.classList.contains("sidebar-open"))));
    const backdrop = document.getElementById("sidebar-backdrop");
    if (backdrop) backdrop.addEventListener("click", () => setOpen(false));
    document.addEventListener("keydown", (event) => { if (event.key === "Escape") setOpen(false); });
  }

  function csrfToken() {
    const field = document.querySelector("[name=csrfmiddlewaretoken]");
    return field ? field.value : "";
  }

  function postForm(url, fields) {
    const body = new URLSearchParams(fields);
    return fetch(url, {
      method: "POST", body: body, credentials: "same-origin",
      headers: { "Accept": "application/json", "X-CSRFToken": csrfToken() },
    }).then((response) => response.json().then((data) => ({ ok: response.ok, data: data })));
  }

  // The sidebar's rename button: ask for the title, save it, show it here and in the page's heading.
  function installRename(T) {
    document.addEventListener("click", (event) => {
      const button = event.target.closest("button.rename");
      if (!button) return;
      const item = button.closest("li");
      const shown = item.querySelector(".conv-title");
      const title = window.prompt(T.rename_prompt, shown.textContent);
      if (title === null || title.trim() === shown.textContent) return;
      postForm(button.dataset.url, { title: title }).then((result) => {
        if (!result.ok) { window.alert(result.data.error.message); return; }
        shown.textContent = result.data.title;
        item.querySelector("a").title = result.data.title;
        const heading = document.getElementById("chat-title");
        if (heading && item.classList.contains("active")) {
          heading.textContent = result.data.title;
          document.title = result.data.title + " · Pagoda";
        }
      });
    });
  }

  // The sidebar's search box: results replace the list while it holds text (Escape clears it).
  function installSearch(T) {
    const box = document.getElementById("conversation-search");
    if (!box) return;
    const list = document.getElementById("conversation-list");
    const results = document.getElementById("search-results");
    let timer = null;
    let asked = "";
    const show = (query, items) => {
      if (query !== asked) return; // an older answer arriving late
      results.replaceChildren();
      items.forEach((item) => {
        const li = document.createElement("li");
        li.className = "result";
        const link = document.createElement("a");
        link.href = item.url;
        link.textContent = item.title || T.untitled;
        li.append(link);
        if (item.snippet) {
          const snippet = document.createElement("span");
          snippet.className = "snippet";
          snippet.textContent = item.snippet;
          li.append(snippet);
        }
        results.append(li);
      });
      if (!items.length) {
        const none = document.createElement("li");
        none.className = "none";
        none.textContent = T.search_none;
        results.append(none);
      }
      results.hidden = false;
      list.hidden = true;
    };
    const run = () => {
      const query = box.value.trim();
      asked = query;
      if (!query) { results.hidden = true; list.hidden = false; return; }
      fetch(box.form.action + "?q=" + encodeURIComponent(query), {
        headers: { "Accept": "application/json" }, credentials: "same-origin",
      }).then((response) => response.json()).then((data) => {
        if (data.error) { asked = query; show(query, []); return; }
        show(query, data.results);
      });
    };
    box.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(run, 200); });
    box.form.addEventListener("submit", (event) => { event.preventDefault(); clearTimeout(timer); run(); });
    box.addEventListener("keydown", (event) => {
      if (event.key === "Escape") { box.value = ""; run(); }
    });
    document.addEventListener("keydown", (event) => {
      if ((event.ctrlKey || event.metaKey) && (event.code === "KeyK" || event.key.toLowerCase() === "k")) { // code: IME on
        event.preventDefault();
        document.body.classList.add("sidebar-open"); // on a phone the box is in the drawer
        box.focus();
      }
    });
  }

  function install(T) {
    installDrawer();
    installRename(T);
    installSearch(T);
  }

  window.PagodaSidebar = { install: install };
})();
