"""End to end in a real headless Chromium: a real daphne server with the real engine (the default
SmolLM2, or PAGODA_MODEL), driven by Playwright. Log in, read a stored Markdown reply, start a new
chat, watch tokens arrive, stop a reply, reload and find the history, switch to Korean.

Needs Debian's chromium (`apt-get install -y chromium`) and `pip install playwright==1.65.2` (its
bundled driver only; never `playwright install`): skipped with the reason when either is missing.
Screenshots go to the test's tmp dir; with PAGODA_UPDATE_SCREENSHOTS=1 they are also copied to
docs/screenshots/ (off by default, so a test run leaves the checkout as it found it).
"""
import pytest
from browser_testing import DESKTOP, browser_page, keep_screenshot, require_browser, serve

PASSWORD = "e2e-pass-4821"
SAMPLE_REPLY = (
    "Use **pathlib** or `os.listdir`:\n\n```python\nfrom pathlib import Path\n\nfor path in Path('.').iterdir():\n"
    "    print(path)\n```\n\nNever paste <img src=x onerror=alert(1)> from strangers."
)
SEED = f"""
from django.contrib.auth import get_user_model
from chat import history
from chat.models import Message
from tenants import services
from tenants.models import SamplingProfile

tenant = services.create_tenant(name="Acme", slug="acme")
services.create_system_prompt(tenant, "You are Acme's internal assistant. Answer briefly.")
services.save_profile(SamplingProfile(tenant=tenant, name="quick", description="Short answers", temperature=0.7,
                                      top_p=0.95, max_tokens=24, seed=7, is_default=True))
services.save_profile(SamplingProfile(tenant=tenant, name="long", description="Long answers", temperature=0.8,
                                      max_tokens=400, ignore_eos=True, seed=7))
user = get_user_model().objects.create_user("mina", password={PASSWORD!r})
services.add_member(tenant, user)
conversation = history.create_conversation(tenant, user)
history.add_user_message(conversation, "How do I list files in Python?")
reply = history.create_pending_reply(conversation, profile=None, system_prompt=None)
history.finish_reply(reply, content={SAMPLE_REPLY!r}, status=Message.Status.COMPLETE, finish_reason="stop")
"""


@pytest.fixture(scope="module")
def chat_server(tmp_path_factory):
    """A seeded daphne server with the real engine on a free port of 127.0.0.1; yields its URL."""
    require_browser()
    with serve(tmp_path_factory.mktemp("chat-e2e"), SEED, engine=True) as url:
        yield url


@pytest.fixture
def page(chat_server):
    with browser_page(DESKTOP) as page:  # its default timeout suits replies from a CPU
        yield page


def _wait_streaming_text(page) -> None:
    """Until the reply being written shows text (a delta arrived) while it still streams."""
    page.wait_for_function(
        "() => { const b = document.querySelector('.msg-assistant.streaming .msg-body');"
        " return b !== null && b.querySelector('.typing') === null && b.textContent.trim().length > 0; }")


def test_chat_in_a_real_browser(chat_server, page, tmp_path):
    from playwright.sync_api import expect

    # Log in: the home page is the chat, which opens the newest conversation.
    page.goto(chat_server + "/accounts/login/")
    page.fill("#id_username", "mina")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/chat/*/")
    sample_url = page.url

    # The stored reply: Markdown rendered, the <img> shown as text, a copy button on the code.
    sample = page.locator(".msg-assistant .msg-body")
    expect(sample.locator("strong")).to_have_text("pathlib")
    expect(sample.locator(".code-block code")).to_contain_text("for path in Path('.').iterdir():")
    assert sample.locator("img").count() == 0
    expect(sample).to_contain_text("<img src=x onerror=alert(1)>")
    sample.locator(".copy-code").click()
    expect(sample.locator(".copy-code")).to_have_text("Copied")
    page.screenshot(path=tmp_path / "chat-markdown.png")

    # A new chat: tokens arrive as they are generated, then the reply is done.
    page.click(".sidebar .new-chat-button")
    page.wait_for_function(f"() => location.href !== {sample_url!r} && /\\/chat\\/\\d+\\/$/.test(location.pathname)")
    expect(page.locator("#status")).to_have_attribute("data-state", "connected")
    page.evaluate("""() => {
        window.__renders = 0;
        new MutationObserver(() => { window.__renders++; })
            .observe(document.querySelector('#messages'), {childList: true, subtree: true, characterData: true});
    }""")
    page.fill("#input", "Hello! 안녕하세요. What is a pagoda?")
    page.keyboard.press("Enter")
    expect(page.locator(".msg-user .msg-body").last).to_have_text("Hello! 안녕하세요. What is a pagoda?")
    _wait_streaming_text(page)
    expect(page.locator("#stop")).to_be_visible()
    first = page.locator(".msg-assistant").last
    expect(first).to_have_attribute("data-status", "complete")
    assert page.evaluate("window.__renders") > 3  # the reply grew piece by piece
    expect(first.locator(".usage")).to_contain_text("prompt")
    expect(page.locator("#chat-title")).to_have_text("Hello! 안녕하세요. What is a pagoda?")
    expect(page.locator("#conversation-list li.active a")).to_contain_text("Hello! 안녕하세요.")

    # Stop a long reply mid-way.
    page.select_option("#profile", "long")
    page.fill("#input", "Write a very long story about a cat who learns to code.")
    page.click("#send")
    page.wait_for_function(  # long enough to show, short of the 400 tokens asked for
        "() => { const b = document.querySelector('.msg-assistant.streaming .msg-body');"
        " return b !== null && b.textContent.trim().length > 60; }")
    page.screenshot(path=tmp_path / "chat-streaming.png")
    page.click("#stop")
    stopped = page.locator(".msg-assistant").last
    expect(stopped).to_have_attribute("data-status", "stopped")
    expect(stopped.locator(".badge.stopped")).to_have_text("Stopped")
    expect(page.locator("#send")).to_be_visible()
    stopped_text = stopped.locator(".msg-body").inner_text()
    assert stopped_text.strip()

    # Reload: the history is there, the stopped reply still marked, the profile remembered.
    page.reload()
    expect(page.locator("#status")).to_have_attribute("data-state", "connected")
    expect(page.locator(".msg-user")).to_have_count(2)
    expect(page.locator(".msg-assistant")).to_have_count(2)
    expect(page.locator(".msg-assistant").last.locator(".badge.stopped")).to_be_visible()
    assert page.locator(".msg-assistant").last.locator(".msg-body").inner_text() == stopped_text
    expect(page.locator("#profile")).to_have_value("long")
    expect(page.locator("#conversation-list li")).to_have_count(2)
    page.screenshot(path=tmp_path / "chat.png")

    # Korean UI.
    page.click(".lang-switch button[value=ko]")
    expect(page.locator("#send")).to_have_text("보내기")
    expect(page.locator(".new-chat-button").first).to_contain_text("새 대화")
    expect(page.locator(".msg-assistant").last.locator(".badge.stopped")).to_have_text("중지됨")
    page.screenshot(path=tmp_path / "chat-ko.png")
    for name in ("chat.png", "chat-markdown.png", "chat-streaming.png", "chat-ko.png"):
        keep_screenshot(tmp_path / name)

    # Regenerate the stopped reply with the short profile: it takes the old one's place on the page, which
    # stays one click away (‹ 1 / 2 ›).
    expect(page.locator("#status")).to_have_attribute("data-state", "connected")
    page.select_option("#profile", "quick")
    page.click("#regenerate")
    shown = page.locator(".msg-assistant:not([hidden])")
    expect(page.locator(".msg-assistant").last).to_have_attribute("data-status", "complete")
    expect(shown).to_have_count(2)
    expect(shown.locator(".badge.stopped")).to_have_count(0)
    expect(shown.last.locator(".version-label")).to_have_text("2 / 2")
    shown.last.locator(".version-prev").click()
    expect(shown.last.locator(".badge.stopped")).to_be_visible()
    assert shown.last.locator(".msg-body").inner_text() == stopped_text
    shown.last.locator(".version-next").click()
    expect(shown.last).to_have_attribute("data-status", "complete")

    # The quick profile stops at 24 tokens: a reply cut there gets a badge and a Continue button that asks
    # for the rest as a new turn; a reply that ended by itself gets neither.
    last = shown.nth(1)
    if last.get_attribute("data-finish-reason") == "length":
        expect(last.locator(".badge.length")).to_have_text("길이 제한으로 잘림")  # the page is in Korean by now
        last.locator("button.continue").click()
        expect(page.locator(".msg-user .msg-body").last).to_have_text("마지막 답변이 끊긴 곳에서 그대로 이어서 써 주세요.")
        expect(shown).to_have_count(3)
        expect(shown.last).to_have_attribute("data-status", "complete")
        expect(last.locator("button.continue")).to_have_count(0)  # only the newest reply offers it
        expect(last.locator(".badge.length")).to_have_count(1)  # the badge stays
    else:
        expect(last.locator(".badge.length")).to_have_count(0)
        expect(last.locator("button.continue")).to_have_count(0)

    # Delete the older conversation from the sidebar (after the confirm dialog).
    page.on("dialog", lambda dialog: dialog.accept())
    older = page.locator("#conversation-list li", has_text="How do I list files")
    older.hover()
    older.locator("button.icon.delete").click()
    page.wait_for_load_state()
    expect(page.locator("#conversation-list li")).to_have_count(1)
    expect(page.locator("#conversation-list li")).to_contain_text("Hello! 안녕하세요.")

    assert page.errors == []
