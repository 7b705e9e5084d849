"""The page's Markdown renderer (platform/chat/static/chat/markdown.js), run in Node: it must never let
markup from the model or the user through, and must render the subset it promises."""
import html
import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

MARKDOWN_JS = Path(__file__).resolve().parents[2] / "platform" / "chat" / "static" / "chat" / "markdown.js"

# Every tag the renderer may emit, with the attributes it may carry.
ALLOWED = {
    "p": set(), "br": set(), "strong": set(), "em": set(), "code": set(), "pre": set(), "ul": set(), "ol": set(),
    "li": set(), "blockquote": set(), "hr": set(), "h3": set(), "h4": set(), "h5": set(), "h6": set(),
    "a": {"href", "target", "rel"}, "div": {"class"}, "span": {"class"}, "button": {"type", "class"},
    "table": set(), "thead": set(), "tbody": set(), "tr": set(), "th": {"class"}, "td": {"class"},
}
ALLOWED["code"] = {"class"}  # language-NAME, NAME limited to [A-Za-z0-9_#+.-]


def render(*sources: str) -> list[str]:
    if shutil.which("node") is None:
        pytest.skip("node is not installed (needed to run the page's markdown.js)")
    script = (
        "globalThis.window = globalThis;\n"
        f"require({json.dumps(str(MARKDOWN_JS))});\n"
        "const inputs = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
        "process.stdout.write(JSON.stringify(inputs.map((s) => window.PagodaMarkdown.render(s, {copyLabel: '복사'}))));\n"
    )
    done = subprocess.run(["node", "-e", script], input=json.dumps(sources), capture_output=True, text=True,
                          timeout=30, check=True)
    return json.loads(done.stdout)


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags(markup: str) -> list[tuple[str, dict]]:
    parser = _Tags()
    parser.feed(markup)
    return parser.tags


ATTACKS = [
    '<script>alert(1)</script>',
    '<img src=x onerror="alert(1)">',
    '"><svg onload=alert(1)>',
    "[click](javascript:alert(1))",
    '[x](https://ok.example/" onmouseover="alert(1))',
    "```js\n</code></pre><script>alert(1)</script>\n```",
    "```\" onclick=\"x\n```",
    "**<b>bold</b>** `<i>code</i>` *<u>em</u>*",
    "# <h1>heading</h1>\n- <li>item\n> <blockquote>",
    "&lt;already escaped&gt; & < > \" '",
    "| <script>x</script> | b\" onclick=\"y |\n|:--|--:|\n| <img src=x onerror=alert(1)> | [a](javascript:alert(1)) |",
    "```py\" onclick=\"alert(1)\nx\n```",
    "~~~<script>\ncode\n~~~",
    "> > > <script>alert(1)</script>\n> ```\n> </code><img src=x onerror=alert(1)>",
    "$<script>alert(1)</script>$ and $$<img src=x onerror=alert(1)>$$",
    "\\(</span><script>alert(1)</script>\\)\n$$\n<svg onload=alert(1)>\n$$",
    "\\[\n<script>alert(1)</script>",
]


@pytest.mark.parametrize("source", ATTACKS)
def test_no_markup_gets_through(source):
    (markup,) = render(source)
    for tag, attrs in tags(markup):
        assert tag in ALLOWED, markup
        assert set(attrs) <= ALLOWED[tag], markup
        if tag == "a":
            assert attrs["href"].startswith(("http://", "https://")) and '"' not in attrs["href"], markup
    # Everything the text said is still there, as text.
    text = html.unescape("".join(part for part in _text_parts(markup)))
    for word in ("alert", "script", "img", "click"):
        if word in source:
            assert word in text


def _text_parts(markup: str) -> list[str]:
    parts: list[str] = []

    class Text(HTMLParser):
        def handle_data(self, data):
            parts.append(data)

    Text(convert_charrefs=False).feed(markup)
    return parts


def test_code_block_keeps_its_text_and_gets_a_copy_button():
    code = 'if a < b && c > "d":\n    print(\'안녕\')'
    (markup,) = render(f"Here:\n\n```python\n{code}\n```\nafter")
    assert '<span class="code-lang">python</span>' in markup
    assert '<button type="button" class="copy-code">복사</button>' in markup
    inner = markup.split('<pre><code class="language-python">')[1].split("</code></pre>")[0]
    assert html.unescape(inner) == code
    assert markup.endswith("<p>after</p>")


def test_an_unclosed_fence_renders_as_code_while_it_streams():
    (markup,) = render("```sql\nSELECT *")
    assert '<div class="code-block open">' in markup and '<pre><code class="language-sql">SELECT *</code></pre>' in markup
    (closed,) = render("```sql\nSELECT *\n```")
    assert '<div class="code-block">' in closed


@pytest.mark.parametrize(("source", "code", "after"), [
    ("````md\n```python\nprint(1)\n```\n````\nafter", "```python\nprint(1)\n```", "<p>after</p>"),  # nested fence
    ("~~~\n```\n~~~\nafter", "```", "<p>after</p>"),  # a tilde fence is not closed by backticks
    ("```python title=\"x.py\"\nx = 1\n```\nafter", "x = 1", "<p>after</p>"),  # an info string after the language
    ("   ```\nindented fence\n   ```", "indented fence", ""),
    ("Steps:\n```bash\nls\n```\n```\nunclosed at the end", "unclosed at the end", ""),  # the last one still streams
])
def test_fences_that_used_to_render_as_prose(source, code, after):
    (markup,) = render(source)
    blocks = markup.split("<pre><code")
    assert len(blocks) >= 2, markup
    inner = blocks[-1].split(">", 1)[1].split("</code></pre>")[0]
    assert html.unescape(inner) == code
    assert markup.endswith(after) if after else markup.endswith("</div>")


def test_tables_with_alignment_and_inline_markup():
    (markup,) = render("| Name | Qty | Note |\n|:-----|----:|:---:|\n| **apple** | 3 | `a \\| b` |\n| 배 | 12 |\n\nafter")
    assert markup.startswith('<div class="table-wrap"><table><thead><tr><th class="align-left">Name</th>'
                             '<th class="align-right">Qty</th><th class="align-center">Note</th></tr></thead>')
    assert '<td class="align-left"><strong>apple</strong></td>' in markup
    assert '<td class="align-center"><code>a | b</code></td>' in markup
    assert '<tr><td class="align-left">배</td><td class="align-right">12</td><td class="align-center"></td></tr>' in markup
    assert markup.endswith("</tbody></table></div><p>after</p>")
    (plain,) = render("a | b\n--- | ---\n1 | 2")
    assert "<th>a</th><th>b</th>" in plain and "<td>1</td><td>2</td>" in plain
    (not_table,) = render("a | b is a pipe\nno separator")
    assert "<table>" not in not_table


def test_quotes_hold_blocks():
    (markup,) = render("> **Note**\n> - one\n> - two\n>\n> > nested\nafter")
    assert markup == ("<blockquote><p><strong>Note</strong></p><ul><li>one</li><li>two</li></ul>"
                      "<blockquote><p>nested</p></blockquote></blockquote><p>after</p>")


def test_the_subset():
    (markup,) = render("# Title\n\n**bold**, *em*, `x < y` and [docs](https://example.com/a?b=1&c=2)\n\n"
                       "- one\n- two\n\n1. first\n2. second\n\n> quoted\n\n---\nline one\nline two")
    assert "<h3>Title</h3>" in markup
    assert "<strong>bold</strong>" in markup and "<em>em</em>" in markup and "<code>x &lt; y</code>" in markup
    assert '<a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer nofollow">docs</a>' in markup
    assert "<ul><li>one</li><li>two</li></ul>" in markup and "<ol><li>first</li><li>second</li></ol>" in markup
    assert "<blockquote><p>quoted</p></blockquote>" in markup and "<hr>" in markup
    assert "<p>line one<br>line two</p>" in markup


def test_korean_and_emoji_pass_through():
    (markup,) = render("서울은 **맑음** 🙂")
    assert markup == "<p>서울은 <strong>맑음</strong> 🙂</p>"


def test_every_prefix_of_a_streaming_reply_renders():
    """While a reply streams, each delta re-renders the whole text so far: no prefix may break the renderer,
    and a prefix that ends inside a code fence shows that code as code."""
    reply = ("Intro **bold** and `code`\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n\n> quote\n> - item\n\n"
             "```python\ndef f(x):\n    return x < 1\n```\n\n1. one\n2. two\n\n~~~\nplain\n~~~\n")
    prefixes = [reply[:n] for n in range(len(reply) + 1)]
    rendered = render(*prefixes)
    assert len(rendered) == len(prefixes)
    for prefix, markup in zip(prefixes, rendered):
        for tag, attrs in tags(markup):
            assert tag in ALLOWED and set(attrs) <= ALLOWED[tag], (prefix, markup)
        if prefix.count("```") == 1 and prefix.rstrip("`").endswith(("x", "1")):
            assert '<div class="code-block open">' in markup, (prefix, markup)


MATH = [
    ("Euler: $e^{i\\pi}+1=0$.", '<p>Euler: <span class="math-inline">e^{i\\pi}+1=0</span>.</p>'),
    ("\\(a<b\\) and \\[x^2\\]", '<p><span class="math-inline">a&lt;b</span> and <span class="math-display">x^2</span></p>'),
    ("$$\\frac12$$", '<div class="math-display">\\frac12</div>'),
    ("$$\n\\sum_k k\n= n$$\nafter", '<div class="math-display">\n\\sum_k k\n= n</div><p>after</p>'),
    ("\\[\nx\n\\]", '<div class="math-display">\nx\n</div>'),
    ("**$y$** and *$a*b$*", '<p><strong><span class="math-inline">y</span></strong> and '
                            '<em><span class="math-inline">a*b</span></em></p>'),
    ("| $x_1$ |\n|---|\n| $y$ |", '<div class="table-wrap"><table><thead><tr><th><span class="math-inline">x_1</span>'
                                  '</th></tr></thead><tbody><tr><td><span class="math-inline">y</span></td></tr></tbody>'
                                  '</table></div>'),
    # Money is not math: a $ opens only before a non-space, closes only after one and not before a digit.
    ("It costs $5 and $10, or \\$3 with $ 4 $.", "<p>It costs $5 and $10, or \\$3 with $ 4 $.</p>"),
    ("`$x$` stays code", "<p><code>$x$</code> stays code</p>"),
]


@pytest.mark.parametrize(("source", "markup"), MATH)
def test_math_is_marked_for_typesetting(source, markup):
    assert render(source) == [markup]


def test_an_open_display_formula_waits_while_it_streams():
    reply = "Sum:\n$$\n\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}\n$$\nand $x^2$ inline."
    prefixes = [reply[:n] for n in range(len(reply) + 1)]
    for prefix, markup in zip(prefixes, render(*prefixes)):
        for tag, attrs in tags(markup):
            assert tag in ALLOWED and set(attrs) <= ALLOWED[tag], (prefix, markup)
        if "\n$$\n\\sum" in prefix and prefix.count("$$") == 1:
            assert '<div class="math-display open">' in markup, (prefix, markup)
    assert render(reply)[0].count('class="math-display"') == 1 and 'class="math-inline">x^2<' in render(reply)[0]
