/* A tiny, safe Markdown subset for chat replies (no build step, no dependencies).
 *
 * Safety: the whole source is HTML-escaped FIRST; the rules below only wrap pieces of that escaped
 * text in fixed tags. No character of the model's or the user's text ever reaches innerHTML unescaped.
 * Links must be http(s) (no javascript: URLs); their escaped URL sits in a quoted attribute, where an
 * escaped quote cannot end it. A code fence's language name is limited to [A-Za-z0-9_#+.-].
 *
 * Blocks: fenced code (``` or ~~~, three or more, closed only by a fence of the same kind and at least
 * that long; an unclosed fence runs to the end and its block is marked "open": replies are rendered
 * while they stream), # headings, - / * / + lists, 1. lists, > quotes (holding any of these blocks),
 * | tables | (a header row, a |---|:--:| row, then rows), --- rules, paragraphs. Inline: `code`,
 * **bold**, *italic*, [text](https://link). Code blocks carry class "language-NAME" for the highlighter.
 * Math: $...$ and \(...\) inline, $$...$$ and \[...\] displayed (on one line, or as a block of lines; a
 * block not closed yet is marked "open"), left as escaped TeX in a span / div of class "math-inline" /
 * "math-display" for math.js to typeset. A $ opens math only before a non-space and closes only after
 * one, not before a digit, and never when escaped (\$): "$5 and $10" stays text.
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

  // Inline math, in the order tried: $$..$$, \[..\], \(..\), $..$ (see the rules at the top).
  const INLINE_MATH = /((?<!\\)\$\$[^\n]+?\$\$|\\\[[^\n]+?\\\]|\\\([^\n]+?\\\)|(?<![\\$])\$(?=[^\s$])[^$\n]*?[^\s$\\]\$(?![\d$]))/g;

  function mathSpan(source) {
    const display = source.startsWith("$$") || source.startsWith("\\[");
    const tex = display || source.startsWith("\\(") ? source.slice(2, -2) : source.slice(1, -1);
    return display ? '<span class="math-display">' + tex + "</span>" : '<span class="math-inline">' + tex + "</span>";
  }

  // Math is set aside (as \uE000<n>\uE001) while emphasis and links apply, so **$x$** is bold math.
  function textAndMath(escaped) {
    const spans = [];
    const marked = escaped.replace(INLINE_MATH, (source) => "\uE000" + (spans.push(mathSpan(source)) - 1) + "\uE001");
    return emphasis(marked).replace(/\uE000(\d+)\uE001/g, (mark, n) => (n < spans.length ? spans[n] : mark));
  }

  function inline(escaped) {
    // Code spans first, so nothing inside them is read as math, emphasis or links; then math.
    return escaped.split(/(`[^`\n]+`)/g)
      .map((part, i) => (i % 2 === 1 ? "<code>" + part.slice(1, -1) + "</code>" : textAndMath(part)))
      .join("");
  }

  // `info`: the fence's escaped info string, shown as the label; `lang` also names the class, so it is
  // only ever [A-Za-z0-9_#+.-].
  function codeBlock(escapedCode, lang, info, copyLabel, open) {
    const label = '<span class="code-lang">' + info + "</span>";
    return '<div class="code-block' + (open ? " open" : "") + '"><div class="code-head">' + label +
      '<button type="button" class="copy-code">' + escapeHtml(copyLabel) + "</button></div>" +
      "<pre><code" + (lang ? ' class="language-' + lang + '"' : "") + ">" + escapedCode + "</code></pre></div>";
  }

  // An opening fence: up to three spaces, ``` or ~~~ (or longer), then an info string whose first word
  // names the language (kept only if it is [A-Za-z0-9_#+.-]). A backtick fence's info has no backtick.
  const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})[ \t]*(([^\s`]*)[^`]*)$/;
  const LANG = /^[A-Za-z0-9_#+.-]{1,32}$/;
  const closesFence = (line, fence) => {
    const m = line.match(/^ {0,3}(`{3,}|~{3,})[ \t]*$/);
    return m !== null && m[1][0] === fence[0] && m[1].length >= fence.length;
  };
  const TABLE_SEPARATOR = /^ *\|? *:?-{1,}:? *(\| *:?-{1,}:? *)*\|? *$/;
  const cells = (line) => {
    let text = line.trim();
    if (text.startsWith("|")) text = text.slice(1);
    if (text.endsWith("|") && !text.endsWith("\\|")) text = text.slice(0, -1);
    return text.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, "|"));
  };
  const alignment = (cell) => {
    const left = cell.startsWith(":"), right = cell.endsWith(":");
    return left && right ? "center" : right ? "right" : left ? "left" : "";
  };
  const HEADING = /^(#{1,6})\s+(.+?)\s*#*\s*$/;
  const BULLET = /^\s*[-*+]\s+(.*)$/;
  const NUMBERED = /^\s*\d{1,9}[.)]\s+(.*)$/;
  const QUOTE = /^ {0,3}&gt;\s?(.*)$/;
  const RULE = /^\s*(?:-{3,}|\*{3,}|_{3,})\s*$/;
  // A displayed formula's first line: $$ or \[ with the rest of the line (closed on it, or on a later line).
  const MATH_OPEN = /^ {0,3}(\$\$|\\\[)(.*)$/;
  const MATH_CLOSE = { "$$": "$$", "\\[": "\\]" };

  function render(source, options) {
    const copyLabel = (options && options.copyLabel) || "Copy";
    return renderLines(escapeHtml(String(source || "").replace(/\r\n?/g, "\n")).split("\n"), copyLabel, 0);
  }

  function table(header, align, rows) {
    const cell = (tag, text, i) => "<" + tag + (align[i] ? ' class="align-' + align[i] + '"' : "") + ">" +
      inline(text || "") + "</" + tag + ">";
    return '<div class="table-wrap"><table><thead><tr>' + header.map((h, i) => cell("th", h, i)).join("") +
      "</tr></thead><tbody>" +
      rows.map((row) => "<tr>" + header.map((_, i) => cell("td", row[i], i)).join("") + "</tr>").join("") +
      "</tbody></table></div>";
  }

  // A displayed formula starting at lines[start] (its opening matched as `m`): [html, the next line's
  // index], or null when the line is not one (its closer is followed by more text: inline math then).
  function displayMath(m, lines, start) {
    const close = MATH_CLOSE[m[1]];
    const rest = m[2];
    const closedAt = rest.indexOf(close);
    if (closedAt >= 0) {
      if (rest.slice(closedAt + close.length).trim()) return null;
      return ['<div class="math-display">' + rest.slice(0, closedAt) + "</div>", start + 1];
    }
    const tex = [rest];
    let i = start + 1;
    while (i < lines.length && !lines[i].includes(close)) tex.push(lines[i++]);
    if (i >= lines.length) { // not closed (yet): shown as it is, typeset once it closes
      return ['<div class="math-display open">' + tex.join("\n") + "</div>", i];
    }
    tex.push(lines[i].slice(0, lines[i].indexOf(close)));
    return ['<div class="math-display">' + tex.join("\n") + "</div>", i + 1];
  }

  // `lines` are escaped already; a quote renders its own lines through here again (depth-limited).
  function renderLines(lines, copyLabel, depth) {
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
        const fence = m[1];
        const lang = LANG.test(m[3]) ? m[3] : "";
        const info = m[2].trim().slice(0, 80);
        const code = [];
        i++;
        while (i < lines.length && !closesFence(lines[i], fence)) code.push(lines[i++]);
        const open = i >= lines.length; // no closing fence (yet): the rest is code
        i++; // the closing fence
        out.push(codeBlock(code.join("\n"), lang, info, copyLabel, open));
      } else if ((m = line.match(MATH_OPEN)) && displayMath(m, lines, i)) {
        flush();
        const [html, next] = displayMath(m, lines, i);
        out.push(html);
        i = next;
      } else if (line.includes("|") && i + 1 < lines.length && TABLE_SEPARATOR.test(lines[i + 1]) &&
                 lines[i + 1].includes("-") && (lines[i + 1].includes("|") || line.trim().startsWith("|"))) {
        flush();
        const header = cells(line);
        const align = cells(lines[i + 1]).map(alignment);
        const rows = [];
        i += 2;
        while (i < lines.length && lines[i].includes("|") && lines[i].trim()) rows.push(cells(lines[i++]));
        out.push(table(header, align, rows));
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
        const quoted = [];
        while (i < lines.length && (m = lines[i].match(QUOTE))) { quoted.push(m[1]); i++; }
        out.push("<blockquote>" + (depth < 8 ? renderLines(quoted, copyLabel, depth + 1)
          : "<p>" + quoted.map(inline).join("<br>") + "</p>") + "</blockquote>");
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
