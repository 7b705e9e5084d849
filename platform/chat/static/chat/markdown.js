/* A tiny, safe Markdown subset for chat replies (no build step, no dependencies).
 *
 * Safety: the whole source is HTML-escaped FIRST; the rules below only wrap pieces of that escaped
 * text in fixed tags. No character of the model's or the user's text ever reaches innerHTML unescaped.
 * Links must be http(s) (no javascript: URLs); their escaped URL sits in a quoted attribute, where an
 * escaped quote cannot end it. A code fence's language name is limited to [A-Za-z0-9_#+.-].
 *
 * Blocks: ``` fenced code (an unclosed fence runs to the end: replies are rendered while they stream),
 * # headings, - / * / + lists, 1. lists, > quotes, --- rules, paragraphs. Inline: `code`, **bold**,
 * *italic*, [text](https://link).
 *
 *   PagodaMarkdown.render(text, {copyLabel: "Copy"}) -> HTML string
 *   PagodaMarkdown.escapeHtml(text) -> text with & < > " ' escaped
 */
(function () {
  "use strict";

  const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
  }

  // Inline rules, on escaped text outside code spans.
  function emphasis(escaped) {
    return escaped
      .replace(/\*\*(?=\S)([^*\n]*?\S)\*\*/g, "<strong>$1</strong>")
      .replace(/(^|[^*\w])\*(?=\S)([^*\n]*?\S)\*(?![*\w])/g, "$1<em>$2</em>")
      .replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s()]+)\)/g,
        '<a href="$2" target="_blank" rel="noopener noreferrer nofollow">$1</a>');
  }

  function inline(escaped) {
    // Code spans first, so nothing inside them is read as emphasis or links.
    return escaped.split(/(`[^`\n]+`)/g)
      .map((part, i) => (i % 2 === 1 ? "<code>" + part.slice(1, -1) + "</code>" : emphasis(part)))
      .join("");
  }

  function codeBlock(escapedCode, lang, copyLabel) {
    const label = lang ? '<span class="code-lang">' + lang + "</span>" : '<span class="code-lang"></span>';
    return '<div class="code-block"><div class="code-head">' + label +
      '<button type="button" class="copy-code">' + escapeHtml(copyLabel) + "</button></div>" +
      "<pre><code>" + escapedCode + "</code></pre></div>";
  }

  const FENCE_OPEN = /^\s*```\s*([A-Za-z0-9_#+.-]*)\s*$/;
  const FENCE_CLOSE = /^\s*```\s*$/;
  const HEADING = /^(#{1,6})\s+(.+?)\s*#*\s*$/;
  const BULLET = /^\s*[-*+]\s+(.*)$/;
  const NUMBERED = /^\s*\d{1,9}[.)]\s+(.*)$/;
  const QUOTE = /^&gt;\s?(.*)$/;
  const RULE = /^\s*(?:-{3,}|\*{3,}|_{3,})\s*$/;

  function render(source, options) {
    const copyLabel = (options && options.copyLabel) || "Copy";
    const lines = escapeHtml(String(source || "").replace(/\r\n?/g, "\n")).split("\n");
    const out = [];
    let paragraph = [];
    const flush = () => {
      if (paragraph.length) out.push("<p>" + paragraph.map(inline).join("<br>") + "</p>");
      paragraph = [];
    };
    // Consecutive lines matching `pattern`, as inline-rendered items.
    const takeItems = (start, pattern) => {
      const items = [];
      let i = start, m;
      while (i < lines.length && (m = lines[i].match(pattern))) { items.push(inline(m[1])); i++; }
      return [items, i];
    };

    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if ((m = line.match(FENCE_OPEN))) {
        flush();
        const code = [];
        i++;
        while (i < lines.length && !FENCE_CLOSE.test(lines[i])) code.push(lines[i++]);
        i++; // the closing fence
        out.push(codeBlock(code.join("\n"), m[1], copyLabel));
      } else if ((m = line.match(HEADING))) {
        flush();
        const level = Math.min(m[1].length + 2, 6); // # -> h3: headings stay modest inside a reply
        out.push("<h" + level + ">" + inline(m[2]) + "</h" + level + ">");
        i++;
      } else if (RULE.test(line)) {
        flush();
        out.push("<hr>");
        i++;
      } else if (BULLET.test(line) || NUMBERED.test(line)) {
        flush();
        const ordered = !BULLET.test(line);
        const [items, next] = takeItems(i, ordered ? NUMBERED : BULLET);
        const tag = ordered ? "ol" : "ul";
        out.push("<" + tag + ">" + items.map((item) => "<li>" + item + "</li>").join("") + "</" + tag + ">");
        i = next;
      } else if (QUOTE.test(line)) {
        flush();
        const [items, next] = takeItems(i, QUOTE);
        out.push("<blockquote>" + items.join("<br>") + "</blockquote>");
        i = next;
      } else if (!line.trim()) {
        flush();
        i++;
      } else {
        paragraph.push(line);
        i++;
      }
    }
    flush();
    return out.join("");
  }

  window.PagodaMarkdown = { render: render, escapeHtml: escapeHtml };
})();
