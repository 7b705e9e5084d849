"""The chat page and its history views (no engine): login, sidebar, new, delete, escaping, languages."""
import pytest
from django.urls import reverse

from chat import history
from chat.models import Conversation, Message
from tenants import services


@pytest.fixture
def client_of(client):
    def login(user):
        client.force_login(user)
        return client

    return login


def _chat(conversation, *turns):
    """Store (role, content) turns the way the consumer does."""
    for role, content in turns:
        if role == "user":
            history.add_user_message(conversation, content)
        else:
            reply = history.create_pending_reply(conversation, profile=None, system_prompt=None)
            history.finish_reply(reply, content=content, status=Message.Status.COMPLETE, finish_reason="stop")


def test_login_is_required(client, db):
    response = client.get(reverse("chat:index"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_home_sends_employees_to_their_chat(client_of, member):
    response = client_of(member).get("/")
    assert response.status_code == 302 and response["Location"] == reverse("chat:index")


def test_first_visit_offers_a_new_chat(client_of, member):
    response = client_of(member).get(reverse("chat:index"))
    assert response.status_code == 200
    assert b"New chat" in response.content and b"No conversations yet." in response.content


def test_new_chat_reuses_an_untouched_conversation(client_of, member, tenant):
    client = client_of(member)
    first = client.post(reverse("chat:new"))
    second = client.post(reverse("chat:new"))
    assert first.status_code == second.status_code == 302 and first["Location"] == second["Location"]
    assert Conversation.objects.filter(user=member).count() == 1
    assert client.get(reverse("chat:new")).status_code == 405


def test_index_opens_the_newest_conversation(client_of, member, tenant, conversation):
    newer = history.create_conversation(tenant, member)
    _chat(conversation, ("user", "older"))
    _chat(newer, ("user", "newer"))
    response = client_of(member).get(reverse("chat:index"))
    assert response["Location"] == reverse("chat:conversation", args=[newer.pk])


def test_page_shows_thread_sidebar_profiles_and_socket(client_of, member, conversation, tenant):
    _chat(conversation, ("user", "What is Pagoda?"), ("assistant", "An **on-prem** chatbot."))
    history.create_conversation(tenant, member)  # empty: not in the sidebar
    response = client_of(member).get(reverse("chat:conversation", args=[conversation.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert html.count('class="msg msg-') == 2 and "An **on-prem** chatbot." in html  # JS renders the markdown
    assert html.count("<li data-id=") == 1 and "What is Pagoda?" in html
    assert '<option value="quick" title="" selected>' in html and '<option value="long"' in html
    assert '<script id="chat-config" type="application/json">' in html
    config = response.context["chat_config"]
    assert config["wsPath"] == f"/ws/chat/{conversation.pk}/" and config["maxChars"] == 8000


def test_user_and_model_text_is_escaped(client_of, member, conversation):
    attack = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    _chat(conversation, ("user", attack), ("assistant", attack))
    html = client_of(member).get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html


def test_someone_elses_conversation_is_a_404(client_of, conversation, other_tenant, make_user):
    outsider = make_user("otto", other_tenant)
    client = client_of(outsider)
    assert client.get(reverse("chat:conversation", args=[conversation.pk])).status_code == 404
    assert client.post(reverse("chat:delete", args=[conversation.pk])).status_code == 404
    assert Conversation.objects.filter(pk=conversation.pk).exists()


def test_delete_a_conversation(client_of, member, conversation):
    _chat(conversation, ("user", "forget me"), ("assistant", "done"))
    client = client_of(member)
    assert client.get(reverse("chat:delete", args=[conversation.pk])).status_code == 405
    response = client.post(reverse("chat:delete", args=[conversation.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("chat:index")
    assert not Conversation.objects.filter(pk=conversation.pk).exists() and not Message.objects.exists()


def test_user_without_a_tenant_is_told_so(client_of, make_user):
    response = client_of(make_user("nomad")).get(reverse("chat:index"))
    assert b"not a member of any organisation" in response.content
    assert client_of(make_user("nomad2")).post(reverse("chat:new")).status_code == 302


def test_user_of_two_tenants_picks_one_for_a_new_chat(client_of, member, other_tenant):
    services.add_member(other_tenant, member)
    client = client_of(member)
    assert b'name="tenant"' in client.get(reverse("chat:index")).content
    client.post(reverse("chat:new"), {"tenant": "chat-globex"})
    assert Conversation.objects.get(user=member).tenant == other_tenant


def test_korean_ui(client_of, member, conversation):
    client = client_of(member)
    response = client.get(reverse("chat:conversation", args=[conversation.pk]), HTTP_ACCEPT_LANGUAGE="ko")
    html = response.content.decode()
    assert 'lang="ko"' in html and "새 대화" in html and "보내기" in html and "중지" in html
    assert response.context["chat_config"]["strings"]["copy"] == "복사"


def test_language_switch_sticks(client_of, member, conversation):
    client = client_of(member)
    page = reverse("chat:conversation", args=[conversation.pk])
    response = client.post(reverse("set_language"), {"language": "ko", "next": page})
    assert response.status_code == 302 and response["Location"] == page
    assert "다시 생성" in client.get(page).content.decode()
    client.post(reverse("set_language"), {"language": "en", "next": page})
    assert "Regenerate" in client.get(page).content.decode()


def test_login_page_speaks_korean(client, db):
    html = client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert "로그인" in html and "비밀번호" in html and "한국어" in html


def test_regenerated_replies_are_on_the_page_hidden_newest_shown(client_of, member, conversation):
    _chat(conversation, ("user", "Question"), ("assistant", "Old answer"), ("assistant", "New answer"))
    html = client_of(member).get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    old, new = html.index("Old answer"), html.index("New answer")
    assert old < new  # in order: the page pages through them
    old_article = html[html.rindex("<article", 0, old):old]
    new_article = html[html.rindex("<article", 0, new):new]
    assert ' hidden ' in old_article and "hidden" not in new_article
    assert 'data-parent="' + old_article.split('data-parent="')[1].split('"')[0] + '"' in new_article  # siblings
    from chat import selectors
    turns = selectors.prompt_turns(selectors.thread(conversation))
    assert [t["content"] for t in turns] == ["Question", "New answer"]  # the prompt sees only the newest
