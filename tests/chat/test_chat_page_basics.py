"""Small things every page gets right: a favicon (no 404), /health 503s of a loading model at INFO,
the chat page's phone drawer, theme toggle, paste limit and length-cut strings (the browser test
drives them; these check what the server sends)."""
import logging

import pytest
from django.urls import reverse

from chat_testing import runtime_set_aside


def test_favicon_is_served_not_404(client, db):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("console/favicon.svg")


def test_pages_name_the_icon(client, member):
    assert b'rel="icon"' in client.get(reverse("login")).content  # base.html
    client.force_login(member)
    html = client.get(reverse("chat:index")).content.decode()
    assert 'rel="icon"' in html and "chat/theme.js" in html


def test_health_503_is_logged_at_info(client, db, caplog, settings):
    settings.PAGODA_ENGINE = "off"
    with runtime_set_aside(), caplog.at_level(logging.INFO, logger="django.request"):  # no engine, even if loaded
        response = client.get("/health")
    assert response.status_code == 503
    rows = [r for r in caplog.records if r.name == "django.request"]
    assert rows and all(r.levelno == logging.INFO for r in rows), [(r.levelname, r.getMessage()) for r in rows]


def test_health_503_is_dropped_when_the_level_is_warning(client, db, caplog, settings):
    settings.PAGODA_ENGINE = "off"
    with runtime_set_aside(), caplog.at_level(logging.WARNING, logger="django.request"):
        client.get("/health")
    assert [r for r in caplog.records if r.name == "django.request"] == []


@pytest.mark.parametrize(("path", "status", "level"), [
    ("/v1/chat/completions", 503, logging.ERROR),  # other paths keep Django's level
    ("/health", 500, logging.ERROR),  # a crash of /health itself is still an error
    ("/health", 503, logging.INFO),
])
def test_filter_lowers_only_health_503(path, status, level, rf):
    from pagoda.log_filters import HealthUnavailableAtInfo

    record = logging.LogRecord("django.request", logging.ERROR, __file__, 1, "%s: %s", ("x", path), None)
    record.status_code, record.request = status, rf.get(path)
    logging.getLogger("django.request").setLevel(logging.INFO)
    try:
        assert HealthUnavailableAtInfo().filter(record) is True
    finally:
        logging.getLogger("django.request").setLevel(logging.NOTSET)
    assert record.levelno == level


def test_chat_page_has_drawer_theme_toggle_and_no_silent_truncation(client, member, conversation):
    from chat import history

    history.add_user_message(conversation, "hello")
    client.force_login(member)
    response = client.get(reverse("chat:conversation", args=[conversation.pk]))
    html = response.content.decode()
    assert 'class="menu-button"' in html and 'id="theme-toggle"' in html
    assert "maxlength=" not in html  # the browser would cut a long paste silently; chat.js refuses it instead
    strings = response.context["chat_config"]["strings"]
    assert "{count}" in strings["paste_too_long"] and "{max}" in strings["paste_too_long"]
    assert strings["continue"] and strings["cut_by_length"]


def test_a_length_cut_reply_is_marked_on_the_page(client, member, conversation):
    from chat import history
    from chat.models import Message

    history.add_user_message(conversation, "Tell me everything")
    reply = history.create_pending_reply(conversation, profile=None, system_prompt=None)
    history.finish_reply(reply, content="It all began", status=Message.Status.COMPLETE, finish_reason="length")
    client.force_login(member)
    html = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert 'data-finish-reason="length"' in html


def test_new_controls_are_translated_to_korean(client, member, conversation):
    from chat import history

    history.add_user_message(conversation, "안녕")
    client.force_login(member)
    client.cookies["django_language"] = "ko"
    response = client.get(reverse("chat:conversation", args=[conversation.pk]), HTTP_ACCEPT_LANGUAGE="ko")
    html = response.content.decode()
    assert "대화 검색" in html and "이름 바꾸기" in html and "어두운 화면" in html
    strings = response.context["chat_config"]["strings"]
    assert strings["continue"] == "계속" and strings["cut_by_length"] == "길이 제한으로 잘림"
