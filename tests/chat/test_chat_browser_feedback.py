"""Thumbs, edit-and-resend and the keyboard shortcuts in a real headless Chromium against a real daphne
with the real engine (SmolLM2 on the CPU), at 1280x800 and 390x844, in English and Korean: rate replies
(a comment with the thumbs down, kept over a reload), edit a sent message and resend it (a new branch,
the old one paged back with ‹ ›), the shortcuts' dialog, / to focus, Esc to stop a reply, Ctrl+Shift+O
for a new chat; and the console's Reply quality table counting the thumbs.

Screenshots go to the test's tmp dir; with PAGODA_UPDATE_SCREENSHOTS=1 also to docs/screenshots/.
"""
import pytest

from browser_testing import DESKTOP, PHONE, browser_page, keep_screenshot, log_in, require_browser, serve

PASSWORD = "fb-pass-2207"
USERS = ("desk_en", "desk_ko", "phone_en", "phone_ko")
SEED = f"""
from django.contrib.auth import get_user_model
from chat import history
from chat.models import Message
from tenants import services
from tenants.models import Membership, SamplingProfile

tenant = services.create_tenant(name="Acme", slug="acme")
prompt = services.create_system_prompt(tenant, "You are Acme's internal assistant. Answer briefly.")
quick = services.save_profile(SamplingProfile(tenant=tenant, name="quick", temperature=0.7, top_p=0.95,
                                              max_tokens=12, seed=7, is_default=True))
services.save_profile(SamplingProfile(tenant=tenant, name="long", max_tokens=400, ignore_eos=True, seed=7))
for name in {USERS!r}:
    user = get_user_model().objects.create_user(name, password={PASSWORD!r})
    services.add_member(tenant, user, role=Membership.Role.ADMIN)
    conversation = history.create_conversation(tenant, user)
    for question, answer in [("Name a colour.", "Blue."), ("And a fruit?", "A pear.")]:
        history.add_user_message(conversation, question)
        reply = history.create_pending_reply(conversation, profile=quick, system_prompt=prompt)
        history.finish_reply(reply, content=answer, status=Message.Status.COMPLETE, finish_reason="stop",
                             num_output_tokens=3, time_to_first_token_ms=40)
"""
CASES = [("desk_en", DESKTOP, "en"), ("desk_ko", DESKTOP, "ko"), ("phone_en", PHONE, "en"), ("phone_ko", PHONE, "ko")]
TEXT = {
    "en": {"up": "Good reply", "comment": "Add a comment", "edit_comment": "Edit comment", "edit": "Edit and send again",
           "shortcuts": "Keyboard shortcuts", "stopped": "Stopped", "why": "Too short; say why."},
    "ko": {"up": "좋은 답변", "comment": "의견 남기기", "edit_comment": "의견 고치기", "edit": "고쳐서 다시 보내기",
           "shortcuts": "단축키", "stopped": "중지됨", "why": "너무 짧아요. 이유도 알려 주세요."},
}


@pytest.fixture(scope="module")
def engine_server(tmp_path_factory):
    require_browser()
    with serve(tmp_path_factory.mktemp("chat-feedback"), SEED, engine=True) as url:
        yield url


@pytest.mark.parametrize(("user", "viewport", "lang"), CASES, ids=[c[0] for c in CASES])
def test_thumbs_edit_and_shortcuts(engine_server, tmp_path, user, viewport, lang):
    from playwright.sync_api import expect

    T = TEXT[lang]
    with browser_page(viewport, locale="ko-KR" if lang == "ko" else "en-US") as page:
        page.context.add_cookies([{"name": "django_language", "value": lang, "url": engine_server}])
        log_in(page, engine_server, user, PASSWORD)
        expect(page.locator("#status")).to_have_attribute("data-state", "connected")
        first, second = page.locator(".msg-assistant").nth(0), page.locator(".msg-assistant").nth(1)

        # Thumbs up on the first reply; thumbs down on the second opens the comment box.
        expect(first.locator(".thumb-up")).to_have_attribute("aria-label", T["up"])
        first.locator(".thumb-up").click()
        expect(first.locator(".thumb-up")).to_have_attribute("aria-pressed", "true")
        expect(first.locator(".feedback-comment")).to_have_text(T["comment"])
        second.locator(".thumb-down").click()
        expect(second.locator(".feedback-form textarea")).to_be_focused()
        page.keyboard.type(T["why"])
        page.screenshot(path=tmp_path / f"chat-feedback-{user}.png")
        second.locator(".feedback-form button[type=submit]").click()
        expect(second.locator(".feedback-form")).to_have_count(0)
        expect(second.locator(".feedback-comment")).to_have_text(T["edit_comment"])
        page.reload()
        first, second = page.locator(".msg-assistant").nth(0), page.locator(".msg-assistant").nth(1)
        expect(first.locator(".thumb-up")).to_have_attribute("aria-pressed", "true")
        expect(second.locator(".thumb-down")).to_have_attribute("aria-pressed", "true")
        assert second.get_attribute("data-feedback-comment") == T["why"]
        first.locator(".thumb-up").click()  # pressed again: taken back
        expect(first.locator(".thumb-up")).to_have_attribute("aria-pressed", "false")
        first.locator(".thumb-up").click()
        expect(first.locator(".thumb-up")).to_have_attribute("aria-pressed", "true")

        # Edit the first question and send it again: a new branch, answered by the engine.
        question = page.locator(".msg-user").first
        expect(question.locator(".edit-message")).to_have_attribute("aria-label", T["edit"])
        question.locator(".edit-message").click()
        area = question.locator(".edit-form textarea")
        expect(area).to_have_value("Name a colour.")
        area.fill("Name a colour of the sky.")
        page.screenshot(path=tmp_path / f"chat-edit-{user}.png")
        area.press("Enter")
        shown = page.locator(".msg:not([hidden])")
        expect(shown.locator(".msg-body").first).to_have_text("Name a colour of the sky.")
        expect(page.locator(".msg-assistant.streaming")).to_have_count(0)
        expect(shown).to_have_count(2)  # the later turns stay in the older branch
        expect(shown.first.locator(".version-label")).to_have_text("2 / 2")
        new_reply = shown.nth(1)
        expect(new_reply.locator(".thumb-up")).to_be_visible()  # a reply streamed here can be rated too
        page.screenshot(path=tmp_path / f"chat-branch-{user}.png")
        shown.first.locator(".version-prev").click()
        expect(shown).to_have_count(4)
        expect(shown.locator(".msg-body").nth(0)).to_have_text("Name a colour.")
        expect(shown.locator(".msg-body").nth(3)).to_contain_text("A pear.")
        expect(shown.first.locator(".version-label")).to_have_text("1 / 2")
        page.reload()  # the server shows the newest branch first, and keeps both
        expect(page.locator(".msg:not([hidden])").first.locator(".msg-body")).to_have_text("Name a colour of the sky.")
        expect(page.locator(".msg")).to_have_count(6)

        # Shortcuts: ? lists them, / focuses the message box, Esc stops a reply, Ctrl+Shift+O opens a new chat.
        page.locator("body").click(position={"x": 5, "y": 5}) if viewport is DESKTOP else page.locator("#chat-title").click()
        page.keyboard.press("?")
        dialog = page.locator("dialog.shortcuts-dialog")
        expect(dialog).to_be_visible()
        expect(dialog.locator("h2")).to_have_text(T["shortcuts"])
        expect(dialog.locator("tr")).to_have_count(7)
        page.screenshot(path=tmp_path / f"chat-shortcuts-{user}.png")
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()
        page.keyboard.press("/")
        expect(page.locator("#input")).to_be_focused()
        page.select_option("#profile", "long")
        page.locator("#input").fill("Count slowly to one hundred.")
        page.locator("#input").press("Enter")
        expect(page.locator(".msg-assistant.streaming .msg-body")).not_to_have_text("")
        expect(page.locator("#stop")).to_be_visible()
        page.locator("#input").press("Escape")
        expect(page.locator(".msg-assistant").last.locator(".badge.stopped")).to_have_text(T["stopped"])
        before = page.url
        page.keyboard.press("Control+Shift+O")
        page.wait_for_url(lambda url: url != before)
        expect(page.locator(".msg")).to_have_count(0)

        for name in ("chat-feedback", "chat-edit", "chat-branch", "chat-shortcuts"):
            keep_screenshot(tmp_path / f"{name}-{user}.png")
        assert page.errors == []


def test_the_console_counts_the_thumbs(engine_server, tmp_path):
    from playwright.sync_api import expect

    with browser_page(DESKTOP, timeout_ms=20_000) as page:
        log_in(page, engine_server, "desk_en", PASSWORD)
        reply = page.locator(".msg-assistant:not([hidden])").first
        reply.locator(".thumb-down").click()
        expect(reply.locator(".thumb-down")).to_have_attribute("aria-pressed", "true")
        page.goto(engine_server + "/console/acme/")
        row = page.locator("#reply-quality table").first.locator("tbody tr").first
        expect(row.locator("td").first).to_contain_text("v1 (active)")
        assert int(row.locator("td").nth(1).inner_text()) >= 8  # the seeded replies, and any streamed since
        expect(row.locator("td").nth(2)).to_contain_text("%")
        page.locator("#reply-quality").screenshot(path=tmp_path / "console-reply-quality.png")
        keep_screenshot(tmp_path / "console-reply-quality.png")
        assert page.errors == []
