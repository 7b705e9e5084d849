"""Attachments, math and two tabs in a real headless Chromium, against a real daphne server with the
real engine (the default SmolLM2 on the CPU), at a desktop (1280x800) and a phone (390x844) size, in
English and Korean: a stored reply's TeX typeset by the vendored KaTeX; a PDF and a DOCX attached (their
token counts shown before sending), a fake PDF refused with the reason; the message sent with its
files; a second tab of the conversation that follows the first tab's reply as it streams, and stops it;
a third tab opened mid-reply that catches up and ends with the same text.

Screenshots go to the test's tmp dir; with PAGODA_UPDATE_SCREENSHOTS=1 also to docs/screenshots/.
"""
import pytest

from browser_testing import DESKTOP, PHONE, browser_page, keep_screenshot, log_in, require_browser, serve
from files_testing import docx_bytes, pdf_bytes

PASSWORD = "files-pass-7713"
USERS = ("desk_en", "desk_ko", "phone_en", "phone_ko")
MATH_REPLY = (
    "Euler's identity, $e^{i\\pi} + 1 = 0$, joins five constants. The sum of the first $n$ numbers:\n\n"
    "$$\n\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}\n$$\n\n"
    "and the roots of $ax^2+bx+c=0$ are \\(x = \\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}\\). Prices like $5 and $10 stay text."
)
SEED = f"""
from django.contrib.auth import get_user_model
from chat import history
from chat.models import Message
from tenants import services
from tenants.models import SamplingProfile

tenant = services.create_tenant(name="Acme", slug="acme")
services.save_profile(SamplingProfile(tenant=tenant, name="quick", max_tokens=12, temperature=0.0, is_default=True))
services.save_profile(SamplingProfile(tenant=tenant, name="long", max_tokens=400, ignore_eos=True, temperature=0.8,
                                      seed=3))
for name in {USERS!r}:
    user = get_user_model().objects.create_user(name, password={PASSWORD!r})
    services.add_member(tenant, user)
    conversation = history.create_conversation(tenant, user)
    history.add_user_message(conversation, "Show me some math.")
    reply = history.create_pending_reply(conversation, profile=None, system_prompt=None)
    history.finish_reply(reply, content={MATH_REPLY!r}, status=Message.Status.COMPLETE, finish_reason="stop")
"""

CASES = [("desk_en", DESKTOP, "en"), ("desk_ko", DESKTOP, "ko"), ("phone_en", PHONE, "en"), ("phone_ko", PHONE, "ko")]
TEXT = {
    "en": {"tokens": "tokens", "fake": "not a readable PDF file", "other_tab": "Being written in another tab",
           "stopped": "Stopped"},
    "ko": {"tokens": "토큰", "fake": "읽을 수 있는 PDF 파일이 아닙니다", "other_tab": "다른 탭에서 쓰는 중",
           "stopped": "중지됨"},
}


@pytest.fixture(scope="module")
def files_server(tmp_path_factory):
    require_browser()
    with serve(tmp_path_factory.mktemp("chat-files"), SEED, engine=True) as url:
        yield url


@pytest.mark.parametrize(("user", "viewport", "lang"), CASES, ids=[c[0] for c in CASES])
def test_attachments_math_and_a_second_tab(files_server, tmp_path, user, viewport, lang):
    from playwright.sync_api import expect

    T = TEXT[lang]
    with browser_page(viewport, locale="ko-KR" if lang == "ko" else "en-US") as page:
        page.context.add_cookies([{"name": "django_language", "value": lang, "url": files_server}])
        log_in(page, files_server, user, PASSWORD)
        expect(page.locator("#status")).to_have_attribute("data-state", "connected")

        # Math: the stored reply's TeX typeset (inline and displayed); money left as text.
        reply = page.locator(".msg-assistant").last
        expect(reply.locator(".math-inline .katex")).to_have_count(4)
        expect(reply.locator(".math-display .katex-display")).to_have_count(1)
        expect(reply.locator(".katex-error")).to_have_count(0)
        assert "$5 and $10" in reply.locator(".msg-body").inner_text()
        page.screenshot(path=tmp_path / f"chat-math-{user}.png")

        # Attach a PDF and a DOCX: chips with their token counts before sending; a fake PDF is refused.
        page.set_input_files("#attach-input", files=[
            {"name": "report.pdf", "mimeType": "application/pdf", "buffer": pdf_bytes("Revenue grew ten percent.")},
            {"name": "회의록.docx", "mimeType": "application/octet-stream", "buffer": docx_bytes("비용은 줄었다.")},
        ])
        chips = page.locator("#attachment-list .attachment.draft")
        expect(chips).to_have_count(2)
        expect(chips.filter(has_text="report.pdf")).to_contain_text(T["tokens"])
        page.set_input_files("#attach-input", files=[
            {"name": "fake.pdf", "mimeType": "application/pdf", "buffer": b"just text, not a PDF"}])
        expect(page.locator("#notice")).to_contain_text(T["fake"])
        expect(page.locator("#notice")).to_contain_text("fake.pdf")
        expect(chips).to_have_count(2)
        page.fill("#input", "Summarise the files." if lang == "en" else "파일을 요약해 주세요.")
        page.screenshot(path=tmp_path / f"chat-attach-{user}.png")
        page.click("#send")
        sent = page.locator(".msg-user").last
        expect(sent.locator(".attachment")).to_have_count(2)
        expect(page.locator("#attachment-list")).to_be_hidden()
        expect(page.locator(".msg-assistant.streaming")).to_have_count(0)
        expect(page.locator(".msg-assistant").last).to_have_attribute("data-status", "complete")
        page.reload()  # kept with the message
        expect(page.locator(".msg-user").last.locator(".attachment")).to_have_count(2)

        # A second tab follows the first one's reply as it streams, and can stop it.
        second = page.context.new_page()
        second.set_default_timeout(120_000)
        second.on("pageerror", lambda error: page.errors.append(str(error)))
        second.goto(page.url)
        expect(second.locator("#status")).to_have_attribute("data-state", "connected")
        page.select_option("#profile", "long")
        page.fill("#input", "Tell me a long story." if lang == "en" else "긴 이야기를 들려주세요.")
        page.click("#send")
        followed = second.locator(".msg-assistant.followed")
        expect(followed).to_have_count(1)
        expect(second.locator(".msg-user").last).to_contain_text("story" if lang == "en" else "이야기")
        expect(second.locator("#stop")).to_be_visible()
        expect(second.locator("#send")).to_be_hidden()
        try:
            second.wait_for_function("(placeholder) => { const text = document.querySelector("
                                     "'.msg-assistant.followed .msg-body').innerText.trim();"
                                     "return text.length > 4 && !text.includes(placeholder); }", arg=T["other_tab"])
        finally:
            second.screenshot(path=tmp_path / f"chat-follow-{user}.png")
            page.screenshot(path=tmp_path / f"chat-follow-first-{user}.png")
        second.screenshot(path=tmp_path / f"chat-follow-{user}.png")
        # A tab opened now catches up: the reply so far at once (its row marked followed), then live.
        third = page.context.new_page()
        third.set_default_timeout(120_000)
        third.on("pageerror", lambda error: page.errors.append(str(error)))
        third.goto(page.url)
        caught_up = third.locator(".msg-assistant.followed")
        expect(caught_up).to_have_count(1)
        expect(third.locator("#stop")).to_be_visible()
        second.click("#stop")
        expect(page.locator(".msg-assistant").last.locator(".badge.stopped")).to_have_text(T["stopped"])
        expect(followed.locator(".badge.stopped")).to_have_text(T["stopped"])
        expect(caught_up.locator(".badge.stopped")).to_have_text(T["stopped"])
        expect(second.locator("#send")).to_be_visible()
        first_text = page.locator(".msg-assistant").last.locator(".msg-body").inner_text()
        assert followed.locator(".msg-body").inner_text() == first_text
        assert caught_up.locator(".msg-body").inner_text() == first_text

        for name in ("chat-math", "chat-attach", "chat-follow"):
            keep_screenshot(tmp_path / f"{name}-{user}.png")
        assert page.errors == []
