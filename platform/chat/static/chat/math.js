/* TeX in replies, typeset with KaTeX (vendored; absent: the TeX stays as text). markdown.js marks the
 * math it finds ($...$, \(...\) inline; $$...$$, \[...\] displayed) with the classes "math-inline" and
 * "math-display", holding the escaped TeX; this reads it back from textContent and typesets it. A display
 * block still open while the reply streams (class "open") waits, as an open code fence does.
 * KaTeX runs with trust off (no \href, \url, \includegraphics, no HTML of its own) and never throws:
 * TeX it cannot parse is shown in the error colour.
 *
 *   PagodaMath.typeset(body)
 */
(function () {
  "use strict";

  const CACHE_SIZE = 500; // a streaming reply is typeset again on every frame: keep what was typeset
  const cache = new Map();

  function toHtml(katex, tex, display) {
    const key = (display ? "D" : "I") + tex;
    let html = cache.get(key);
    if (html === undefined) {
      html = katex.renderToString(tex, { displayMode: display, throwOnError: false, trust: false, maxSize: 20,
                                         maxExpand: 500, strict: "ignore" });
      if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value);
      cache.set(key, html);
    }
    return html;
  }

  function typeset(body) {
    const katex = window.katex;
    if (!katex) return;
    body.querySelectorAll(".math-inline, .math-display:not(.open)").forEach((el) => {
      el.innerHTML = toHtml(katex, el.textContent, el.classList.contains("math-display"));
      el.classList.add("typeset");
    });
  }

  window.PagodaMath = { typeset: typeset };
})();
