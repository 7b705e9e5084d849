"""The chat page's controls in a real headless Chromium, at a desktop (1280x800) and a phone (390x844)
size, in English and Korean: the phone drawer (every conversation reachable), dark mode (the OS's and
the toggle's, kept over a reload), rename, pin, search (Ctrl+K), Markdown export, a refused paste,
a length-cut reply's badge and Continue button, a console that does not scroll sideways, no 404 (the
favicon) and no script error. No engine: nothing here needs a reply (test_chat_browser.py streams them).

Screenshots go to the test's tmp dir; with PAGODA_UPDATE_SCREENSHOTS=1 also to docs/screenshots/.
"""
import pytest

from browser_testing import DESKTOP, PHONE, browser_page, keep_screenshot, log_in, require_browser, serve

PASSWORD = "ui-pass-5531"
USERS = ("desk_en", "desk_ko", "phone_en", "phone_ko")
CUT_REPLY = "A pagoda is a tiered tower with multiple eaves, common in"
RICH_REPLY = (
    "| Tool | 용도 | Stars |\n|:--|:--|--:|\n| **ruff** | lint | 30,000 |\n| pytest | 테스트 | 12,000 |\n\n"
    "> **Note**\n> - quoted list\n\n"
    "```python\ndef greet(name: str) -> str:\n    return f\"Hello, {name}\"  # a comment\n```\n\n"
    "Still streaming:\n```sql\nSELECT id FROM users"
)
SEED = f"""
from django.contrib.auth import get_user_model
from chat import history
from chat.models import Message
from tenants import services
from tenants.models import Membership, SamplingProfile

tenant = services.create_tenant(name="Acme", slug="acme")
services.save_profile(SamplingProfile(tenant=tenant, name="quick", max_tokens=24, is_default=True))

def chat(conversation, question, answer, finish_reason="stop"):
    history.add_user_message(conversation, question)
    reply = history.create_pending_reply(conversation, profile=None, system_prompt=None)
    history.finish_reply(reply, content=answer, status=Message.Status.COMPLETE, finish_reason=finish_reason)

for name in {USERS!r}:
    user = get_user_model().objects.create_user(name, password={PASSWORD!r})
    services.add_member(tenant, user, role=Membership.Role.ADMIN)
    for i in range(30):
        chat(history.create_conversation(tenant, user), f"Old question {{i:02d}}", f"Old answer {{i:02d}}")
    versions = history.create_conversation(tenant, user)
    chat(versions, "Versions sample", "First answer")
    for text in ("Second answer", "Third answer"):  # regenerated twice
        reply = history.create_pending_reply(versions, profile=None, system_prompt=None)
        history.finish_reply(reply, content=text, status=Message.Status.COMPLETE, finish_reason="stop")
    chat(history.create_conversation(tenant, user), "Markdown sample", {RICH_REPLY!r})
    chat(history.create_conversation(tenant, user), "How do I make kimchi?", "Salt the napa cabbage overnight.")
    cut = history.create_conversation(tenant, user)
    chat(cut, "What is a pagoda?", {CUT_REPLY!r}, finish_reason="length")
    chat(cut, "And a stupa?", {CUT_REPLY!r}, finish_reason="length")
"""

CASES = [("desk_en", DESKTOP, "en"), ("desk_ko", DESKTOP, "ko"), ("phone_en", PHONE, "en"), ("phone_ko", PHONE, "ko")]
TEXT = {
    "en": {"cut": "Cut at the length limit", "continue": "Continue", "paste": "Not pasted", "none": "Nothing found."},
    "ko": {"cut": "길이 제한으로 잘림", "continue": "계속", "paste": "붙여넣지 않았습니다", "none": "찾은 대화가 없습니다."},
}


@pytest.fixture(scope="module")
def ui_server(tmp_path_factory):
    require_browser()
    with serve(tmp_path_factory.mktemp("chat-ui"), SEED, engine=False, ready_path="/accounts/login/") as url:
        yield url


def _open_sidebar(page, phone: bool) -> None:
    if phone and not page.evaluate("document.body.classList.contains('sidebar-open')"):
        page.click(".chat-head .menu-button")


def _in_viewport(page, locator) -> bool:
    box = locator.bounding_box()
    size = page.viewport_size
    return box is not None and box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= size["width"] + 1 \
        and box["y"] + box["height"] <= size["height"] + 1


@pytest.mark.parametrize(("user", "viewport", "lang"), CASES, ids=[c[0] for c in CASES])
def test_chat_controls(ui_server, tmp_path, user, viewport, lang):
    from playwright.sync_api import expect

    phone = viewport is PHONE
    T = TEXT[lang]
    with browser_page(viewport, locale="ko-KR" if lang == "ko" else "en-US", timeout_ms=20_000) as page:
        missing = []
        page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
        page.context.add_cookies([{"name": "django_language", "value": lang, "url": ui_server}])
        log_in(page, ui_server, user, PASSWORD)
        expect(page.locator("#chat-title")).to_have_text("What is a pagoda?")

        # The length-cut reply: its badge and a Continue button (which sends a turn; no engine here, so the
        # server refuses it and says why).
        reply = page.locator(".msg-assistant").last
        expect(reply.locator(".badge.length")).to_have_text(T["cut"])
        expect(reply.locator("button.continue")).to_have_text(T["continue"])
        earlier = page.locator(".msg-assistant").first  # cut too, but only the newest reply continues
        expect(earlier.locator(".badge.length")).to_have_text(T["cut"])
        expect(earlier.locator("button.continue")).to_have_count(0)
        expect(page.locator("#status")).to_have_attribute("data-state", "connected")
        reply.locator("button.continue").click()
        expect(page.locator("#notice")).to_be_visible()
        expect(reply.locator("button.continue")).to_be_visible()  # refused: the button is back for another try
        page.screenshot(path=tmp_path / f"chat-length-cut-{user}.png")

        # A paste that would pass the limit is refused whole, with a notice.
        page.fill("#input", "")  # the refused Continue turn came back into the composer
        page.evaluate("""() => {
            const input = document.querySelector('#input');
            input.focus();
            const data = new DataTransfer();
            data.setData('text/plain', 'x'.repeat(20000));
            window.__pasteAllowed = input.dispatchEvent(new ClipboardEvent('paste', {clipboardData: data, cancelable: true}));
        }""")
        assert page.evaluate("window.__pasteAllowed") is False
        expect(page.locator("#notice")).to_contain_text(T["paste"])
        expect(page.locator("#notice")).to_contain_text("20,000")
        assert page.input_value("#input") == ""

        # The sidebar: on a phone a drawer behind the menu button, every conversation reachable.
        oldest = page.locator("#conversation-list li", has_text="Old question 00")
        if phone:
            assert not _in_viewport(page, page.locator("#conversation-search"))
            _open_sidebar(page, phone)
        expect(page.locator("#conversation-search")).to_be_visible()
        oldest.scroll_into_view_if_needed()
        assert _in_viewport(page, oldest), "the oldest conversation cannot be reached"
        page.screenshot(path=tmp_path / f"chat-sidebar-{user}.png")

        # Pin the oldest: after the reload it is on top, marked.
        oldest.locator("a").first.click()
        expect(page.locator("#chat-title")).to_have_text("Old question 00")
        _open_sidebar(page, phone)
        page.locator("#conversation-list li.active button.pin").click()
        page.wait_for_load_state()
        expect(page.locator("#conversation-list li").first).to_contain_text("Old question 00")
        expect(page.locator("#conversation-list li").first.locator(".pin-mark")).to_be_visible()

        # Rename it (the prompt dialog), in the sidebar and the heading, kept over a reload.
        _open_sidebar(page, phone)
        page.once("dialog", lambda dialog: dialog.accept("분기 보고서 Q3"))
        page.locator("#conversation-list li.active button.rename").click()
        expect(page.locator("#conversation-list li.active .conv-title")).to_have_text("분기 보고서 Q3")
        expect(page.locator("#chat-title")).to_have_text("분기 보고서 Q3")
        page.reload()
        expect(page.locator("#chat-title")).to_have_text("분기 보고서 Q3")

        # Search with Ctrl+K: the results replace the list; a result opens its conversation.
        page.keyboard.press("Control+k")
        expect(page.locator("#conversation-search")).to_be_focused()
        page.keyboard.type("cabbage")
        expect(page.locator("#search-results li.result")).to_have_count(1)
        expect(page.locator("#conversation-list")).to_be_hidden()
        page.screenshot(path=tmp_path / f"chat-search-{user}.png")
        page.locator("#search-results li.result a").click()
        expect(page.locator("#chat-title")).to_have_text("How do I make kimchi?")
        page.keyboard.press("Control+k")
        page.keyboard.type("zzqqxx")
        expect(page.locator("#search-results li.none")).to_have_text(T["none"])
        page.keyboard.press("Escape")
        expect(page.locator("#conversation-list")).to_be_visible() if not phone else None

        # Export as Markdown.
        _open_sidebar(page, phone)
        with page.expect_download() as download:
            page.locator("#conversation-list li.active a.export").click()
        text = open(download.value.path(), encoding="utf-8").read()
        assert text.startswith("# How do I make kimchi?\n") and "Salt the napa cabbage overnight." in text

        # Dark mode from the toggle, kept over a reload; then back to light.
        if phone:
            page.keyboard.press("Escape")
        page.evaluate("document.querySelector('#theme-toggle').scrollIntoView()")
        _open_sidebar(page, phone)
        page.click("#theme-toggle")
        assert page.evaluate("document.documentElement.dataset.theme") == "dark"
        page.reload()
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(13, 17, 23)"
        page.keyboard.press("Escape")
        page.screenshot(path=tmp_path / f"chat-dark-{user}.png")
        _open_sidebar(page, phone)
        page.click("#theme-toggle")
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(255, 255, 255)"
        page.keyboard.press("Escape")
        page.screenshot(path=tmp_path / f"chat-{user}.png")

        # The console never scrolls sideways on a phone.
        page.goto(ui_server + "/console/acme/")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), \
            page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        page.screenshot(path=tmp_path / f"console-{user}.png", full_page=True)

        kept = ["chat-length-cut", "chat-sidebar", "chat-search", "chat-dark", "chat"]
        kept += ["console"] if user == "phone_en" else []  # the console is in English, and wide on a desktop anyway
        for name in kept:
            keep_screenshot(tmp_path / f"{name}-{user}.png")
        assert missing == []  # the favicon included
        assert page.errors == []


def test_dark_mode_follows_the_operating_system(ui_server):
    with browser_page(DESKTOP, color_scheme="dark", timeout_ms=20_000) as page:
        log_in(page, ui_server, "desk_en", PASSWORD)
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(13, 17, 23)"
        assert page.evaluate("document.querySelector('#theme-toggle').getAttribute('aria-pressed')") == "true"


@pytest.mark.parametrize(("viewport", "lang", "scheme"), [(DESKTOP, "en", "light"), (PHONE, "ko", "dark")],
                         ids=["desktop-en-light", "phone-ko-dark"])
def test_rich_replies_render(ui_server, tmp_path, viewport, lang, scheme):
    from playwright.sync_api import expect

    name = f"chat-markdown-{'desktop' if viewport is DESKTOP else 'phone'}-{lang}-{scheme}.png"
    with browser_page(viewport, locale="ko-KR" if lang == "ko" else "en-US", color_scheme=scheme,
                      timeout_ms=20_000) as page:
        page.context.add_cookies([{"name": "django_language", "value": lang, "url": ui_server}])
        log_in(page, ui_server, "desk_en", PASSWORD)
        page.goto(ui_server + page.locator("#conversation-list li", has_text="Markdown sample").locator("a").first.get_attribute("href"))
        body = page.locator(".msg-assistant .msg-body")
        expect(body.locator("table th")).to_have_count(3)
        expect(body.locator("table td.align-right").first).to_have_text("30,000")
        expect(body.locator("table strong")).to_have_text("ruff")
        expect(body.locator("blockquote li")).to_have_text("quoted list")
        python = body.locator("code.language-python")
        expect(python.locator(".hljs-keyword").first).to_have_text("def")  # highlight.js, served from /static/
        expect(python.locator(".hljs-comment")).to_have_text("# a comment")
        assert "Hello, {name}" in python.text_content()
        still_open = body.locator(".code-block.open code.language-sql")
        expect(still_open).to_have_text("SELECT id FROM users")  # an unclosed fence is code, not prose
        assert still_open.locator("span").count() == 0  # and waits for its fence before it is coloured
        color = page.evaluate("getComputedStyle(document.querySelector('.hljs-keyword')).color")
        assert color == ("rgb(255, 123, 114)" if scheme == "dark" else "rgb(207, 34, 46)")
        if viewport is PHONE:  # a wide table scrolls inside its frame, the page does not
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.screenshot(path=tmp_path / name)
        keep_screenshot(tmp_path / name)
        assert page.errors == []


def test_regenerated_replies_keep_every_version(ui_server):
    from playwright.sync_api import expect

    with browser_page(PHONE, locale="ko-KR", timeout_ms=20_000) as page:
        page.context.add_cookies([{"name": "django_language", "value": "ko", "url": ui_server}])
        log_in(page, ui_server, "phone_ko", PASSWORD)
        page.goto(ui_server + page.locator("#conversation-list li", has_text="Versions sample").locator("a").first.get_attribute("href"))
        shown = page.locator(".msg-assistant:not([hidden])")
        expect(shown).to_have_count(1)
        expect(shown.locator(".msg-body")).to_have_text("Third answer")  # the newest first
        expect(shown.locator(".version-label")).to_have_text("3 / 3")
        expect(shown.locator(".version-next")).to_be_disabled()
        shown.locator(".version-prev").click()
        expect(shown.locator(".msg-body")).to_have_text("Second answer")
        shown.locator(".version-prev").click()
        expect(shown.locator(".msg-body")).to_have_text("First answer")
        expect(shown.locator(".version-label")).to_have_text("1 / 3")
        expect(shown.locator(".version-prev")).to_be_disabled()
        expect(shown.locator(".version-prev")).to_have_attribute("aria-label", "이전 버전")
        shown.locator(".version-next").click()
        expect(shown.locator(".msg-body")).to_have_text("Second answer")
        assert page.errors == []
