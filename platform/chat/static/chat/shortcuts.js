/* Keyboard shortcuts of the chat page, and the dialog that lists them ("?" or the sidebar's button).
 * Letters are matched by their key's position (event.code), so they work while a Korean IME is on.
 * Ctrl+K (search) and Escape in the search box are sidebar.js's; listed here too.
 *
 *   Ctrl+Shift+O  new chat          / or Shift+Esc  focus the message box     Esc  stop the reply
 *   Ctrl+K        search            ? or Ctrl+/     these shortcuts           Enter / Shift+Enter  send / new line
 */
(function () {
  "use strict";

  const configNode = document.getElementById("chat-config");
  if (!configNode) return;
  const T = JSON.parse(configNode.textContent).strings;
  const mac = /Mac|iPhone|iPad/.test(navigator.platform || "");
  const ctrl = mac ? "\u2318" : "Ctrl";
  const SHORTCUTS = [
    [[ctrl, "Shift", "O"], T.shortcut_new_chat],
    [["/"], T.shortcut_focus],
    [["Esc"], T.shortcut_stop],
    [[ctrl, "K"], T.shortcut_search],
    [["Enter"], T.shortcut_send],
    [["Shift", "Enter"], T.shortcut_newline],
    [["?"], T.shortcut_help],
  ];

  function typing(target) {
    return target instanceof HTMLElement && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  function keys(names) {
    const cell = document.createElement("td");
    names.forEach((name, i) => {
      if (i) cell.append("+");
      const kbd = document.createElement("kbd");
      kbd.textContent = name;
      cell.append(kbd);
    });
    return cell;
  }

  let dialog = null;
  function help() {
    if (!dialog) {
      dialog = document.createElement("dialog");
      dialog.className = "shortcuts-dialog";
      dialog.setAttribute("aria-labelledby", "shortcuts-title");
      const heading = document.createElement("h2");
      heading.id = "shortcuts-title";
      heading.textContent = T.shortcuts_title;
      const table = document.createElement("table");
      SHORTCUTS.forEach(([names, what]) => {
        const row = document.createElement("tr");
        const text = document.createElement("td");
        text.textContent = what;
        row.append(keys(names), text);
        table.append(row);
      });
      const form = document.createElement("form");
      form.method = "dialog";
      const close = document.createElement("button");
      close.className = "secondary";
      close.textContent = T.close;
      form.append(close);
      dialog.append(heading, table, form);
      document.body.append(dialog);
    }
    if (!dialog.open) dialog.showModal();
  }

  function click(selector) {
    const element = document.querySelector(selector);
    if (!element || element.hidden || element.disabled) return false;
    element.click();
    return true;
  }

  document.addEventListener("keydown", (event) => {
    const mod = event.ctrlKey || event.metaKey;
    if (mod && event.shiftKey && event.code === "KeyO") {
      const form = document.getElementById("new-chat");
      if (form) { event.preventDefault(); form.requestSubmit(); }
    } else if (mod && event.code === "Slash") {
      event.preventDefault();
      help();
    } else if (event.key === "Escape" && event.shiftKey) {
      const input = document.getElementById("input");
      if (input) { event.preventDefault(); input.focus(); }
    } else if (event.key === "Escape" && !(dialog && dialog.open) && (!typing(event.target) || event.target.id === "input")) {
      click("#stop"); // only while a reply is being written (the button shows then); not from the search box
    } else if (!mod && !event.altKey && !typing(event.target)) {
      if (event.key === "?") { event.preventDefault(); help(); }
      else if (event.key === "/") {
        const input = document.getElementById("input");
        if (input) { event.preventDefault(); input.focus(); }
      }
    }
  });

  // Where the keys are named: the sidebar's button that opens the list, and tooltips.
  const row = document.querySelector(".theme-row");
  if (row) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "theme-toggle shortcuts-button";
    button.textContent = T.shortcuts_button;
    button.title = T.shortcuts_title + " (?)";
    button.addEventListener("click", help);
    row.append(button);
  }
  const titles = { ".new-chat-button": ctrl + "+Shift+O", "#stop": "Esc", "#conversation-search": ctrl + "+K" };
  Object.entries(titles).forEach(([selector, key]) => {
    document.querySelectorAll(selector).forEach((el) => { el.title = (el.textContent.trim() || el.placeholder) + " (" + key + ")"; });
  });
  window.PagodaShortcuts = { help: help };
})();
