/* Light / dark theme: the OS's preference (prefers-color-scheme, in chat.css) unless the person chose
 * one with the toggle; the choice is kept in localStorage. Loaded in <head>, so the page never flashes
 * the other theme. */
(function () {
  "use strict";
  const KEY = "pagoda-theme";
  const root = document.documentElement;

  function stored() {
    try { return localStorage.getItem(KEY); } catch (e) { return null; } // storage may be disabled
  }

  function current() {
    const chosen = root.dataset.theme;
    if (chosen === "dark" || chosen === "light") return chosen;
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }

  function apply(theme) {
    if (theme === "dark" || theme === "light") root.dataset.theme = theme;
    else delete root.dataset.theme;
  }

  apply(stored());

  document.addEventListener("DOMContentLoaded", () => {
    const button = document.getElementById("theme-toggle");
    if (!button) return;
    const label = () => {
      const dark = current() === "dark";
      button.setAttribute("aria-pressed", String(dark));
      button.textContent = dark ? button.dataset.light : button.dataset.dark;
    };
    button.addEventListener("click", () => {
      const next = current() === "dark" ? "light" : "dark";
      apply(next);
      try { localStorage.setItem(KEY, next); } catch (e) { /* kept for this page only */ }
      label();
    });
    label();
  });
})();
