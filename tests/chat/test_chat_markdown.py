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
}


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
    inner = markup.split("<pre><code>")[1].split("</code></pre>")[0]
    assert html.unescape(inner) == code
    assert markup.endswith("<p>after</p>")


def test_an_unclosed_fence_renders_as_code_while_it_streams():
    (markup,) = render("```sql\nSELECT *")
    assert "<pre><code>SELECT *</code></pre>" in markup


def test_the_subset():
    (markup,) = render("# Title\n\n**bold**, *em*, `x < y` and [docs](https://example.com/a?b=1&c=2)\n\n"
                       "- one\n- two\n\n1. first\n2. second\n\n> quoted\n\n---\nline one\nline two")
    assert "<h3>Title</h3>" in markup
    assert "<strong>bold</strong>" in markup and "<em>em</em>" in markup and "<code>x &lt; y</code>" in markup
    assert '<a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer nofollow">docs</a>' in markup
    assert "<ul><li>one</li><li>two</li></ul>" in markup and "<ol><li>first</li><li>second</li></ol>" in markup
    assert "<blockquote>quoted</blockquote>" in markup and "<hr>" in markup
    assert "<p>line one<br>line two</p>" in markup


def test_korean_and_emoji_pass_through():
    (markup,) = render("서울은 **맑음** 🙂")
    assert markup == "<p>서울은 <strong>맑음</strong> 🙂</p>"
