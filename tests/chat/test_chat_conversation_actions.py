"""Rename, pin, search and Markdown export of conversations (no engine). Nothing of another user's or
another tenant's is reachable through them: a 404, as a missing conversation. Search runs on the
test database: full-text search on PostgreSQL, a substring match on SQLite."""
import pytest
from django.urls import reverse

from chat import history
from chat.models import Conversation, Message
from tenants import services
from tenants.models import Membership

JSON = {"HTTP_ACCEPT": "application/json"}


def _chat(conversation, *turns, finish_reason="stop", status=Message.Status.COMPLETE):
    for role, content in turns:
        if role == "user":
            history.add_user_message(conversation, content)
        else:
            reply = history.create_pending_reply(conversation, profile=None, system_prompt=None)
            history.finish_reply(reply, content=content, status=status, finish_reason=finish_reason)


def _sidebar(html: str) -> str:
    return html[html.index('id="conversation-list"'):html.index("</nav>")]


@pytest.fixture
def strangers(tenant, other_tenant, make_user):
    """A colleague in the same tenant and someone of another tenant, each with a conversation."""
    colleague = make_user("colleague", tenant)
    outsider = make_user("outsider", other_tenant)
    theirs = history.create_conversation(tenant, colleague)
    _chat(theirs, ("user", "colleague secret kimchi recipe"), ("assistant", "kimchi needs napa cabbage"))
    foreign = history.create_conversation(other_tenant, outsider)
    _chat(foreign, ("user", "globex secret kimchi plan"), ("assistant", "kimchi everywhere"))
    return theirs, foreign


# --- rename ------------------------------------------------------------------------------------------
def test_rename_sets_the_title_and_keeps_the_sidebar_order(client, member, tenant, conversation):
    _chat(conversation, ("user", "first question"))
    newer = history.create_conversation(tenant, member)
    _chat(newer, ("user", "second question"))
    client.force_login(member)
    before = Conversation.objects.get(pk=conversation.pk).updated_at
    response = client.post(reverse("chat:rename", args=[conversation.pk]), {"title": "  Budget   plan 2027 "}, **JSON)
    assert response.status_code == 200 and response.json() == {"id": conversation.pk, "title": "Budget plan 2027"}
    conversation.refresh_from_db()
    assert conversation.title == "Budget plan 2027" and conversation.updated_at == before
    html = _sidebar(client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode())
    assert html.index("second question") < html.index("Budget plan 2027</span>")


def test_rename_without_script_redirects_back(client, member, conversation):
    client.force_login(member)
    response = client.post(reverse("chat:rename", args=[conversation.pk]), {"title": "회의록", "next": "/chat/"})
    assert response.status_code == 302 and response["Location"] == "/chat/"
    evil = client.post(reverse("chat:rename", args=[conversation.pk]), {"title": "x", "next": "https://evil.example/"})
    assert evil["Location"] == reverse("chat:conversation", args=[conversation.pk])
    assert Conversation.objects.get(pk=conversation.pk).title == "x"


@pytest.mark.parametrize(("title", "message"), [("", "empty"), ("   \n ", "empty"), ("x" * 201, "at most 200")])
def test_rename_refuses_a_bad_title_with_a_json_error(client, member, conversation, title, message):
    history.rename_conversation(conversation, "Kept")
    client.force_login(member)
    response = client.post(reverse("chat:rename", args=[conversation.pk]), {"title": title}, **JSON)
    assert response.status_code == 400 and message in response.json()["error"]["message"]
    assert Conversation.objects.get(pk=conversation.pk).title == "Kept"


def test_rename_is_post_only(client, member, conversation):
    client.force_login(member)
    assert client.get(reverse("chat:rename", args=[conversation.pk])).status_code == 405


# --- pin ---------------------------------------------------------------------------------------------
def test_pinned_conversation_comes_first_until_unpinned(client, member, tenant, conversation):
    _chat(conversation, ("user", "old but important"))
    newer = history.create_conversation(tenant, member)
    _chat(newer, ("user", "fresh chatter"))
    client.force_login(member)

    def order():
        html = _sidebar(client.get(reverse("chat:conversation", args=[newer.pk])).content.decode())
        return html.index("old but important") < html.index("fresh chatter")

    assert not order()
    response = client.post(reverse("chat:pin", args=[conversation.pk]), {"pinned": "1"}, **JSON)
    assert response.json() == {"id": conversation.pk, "pinned": True}
    assert order()
    assert client.post(reverse("chat:pin", args=[conversation.pk]), {"pinned": "0"}).status_code == 302
    assert not order()
    bad = client.post(reverse("chat:pin", args=[conversation.pk]), {"pinned": "yes"}, **JSON)
    assert bad.status_code == 400 and "pinned" in bad.json()["error"]["message"]


# --- export.md ---------------------------------------------------------------------------------------
def test_export_md_is_the_visible_thread_as_markdown(client, member, conversation):
    _chat(conversation, ("user", "# not a heading\nsecond line"), ("assistant", "First **answer**"))
    _chat(conversation, ("assistant", "Regenerated answer with a table\n\n| a | b |\n|---|---|\n| 1 | 2 |"))
    _chat(conversation, ("user", "Go on"), ("assistant", "It was cut"), finish_reason="length")
    history.rename_conversation(conversation, "회의 요약")
    client.force_login(member)
    response = client.get(reverse("chat:export_md", args=[conversation.pk]))
    assert response.status_code == 200 and response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="pagoda-conversation-{conversation.pk}.md"'
    text = response.content.decode()
    assert text.startswith("# 회의 요약\n")
    assert "> # not a heading\n> second line" in text  # the user's text is quoted, not a heading
    assert "First **answer**" not in text and "| 1 | 2 |" in text  # the newest reply only, Markdown kept
    assert "It was cut\n\n*(cut at the length limit)*" in text
    assert text.count("## You") == 2 and text.count("## Assistant") == 2


# --- search ------------------------------------------------------------------------------------------
def test_search_finds_titles_and_messages_of_the_user_only(client, member, tenant, conversation, strangers):
    _chat(conversation, ("user", "How do I make kimchi at home?"), ("assistant", "Salt the cabbage overnight."))
    other = history.create_conversation(tenant, member)
    _chat(other, ("user", "Quarterly numbers"), ("assistant", "Revenue grew."))
    history.rename_conversation(other, "Kimchi budget")
    client.force_login(member)
    response = client.get(reverse("chat:search"), {"q": "kimchi"}, **JSON)
    assert response.status_code == 200
    results = response.json()["results"]
    assert {r["id"] for r in results} == {conversation.pk, other.pk}  # nothing of the colleague's or Globex's
    assert results[0]["id"] == other.pk  # a title match first
    by_id = {r["id"]: r for r in results}
    assert "kimchi" in by_id[conversation.pk]["snippet"].lower()
    assert by_id[conversation.pk]["url"] == reverse("chat:conversation", args=[conversation.pk])
    cabbage = client.get(reverse("chat:search"), {"q": "cabbage"}, **JSON).json()["results"]
    assert [r["id"] for r in cabbage] == [conversation.pk]  # replies are searched too
    assert client.get(reverse("chat:search"), {"q": "napa"}, **JSON).json()["results"] == []  # the colleague's


def test_search_in_korean_and_as_a_page(client, member, conversation):
    _chat(conversation, ("user", "회의 일정 알려줘"), ("assistant", "내일 오후 3시입니다."))
    client.force_login(member)
    assert [r["id"] for r in client.get(reverse("chat:search"), {"q": "회의"}, **JSON).json()["results"]] == [conversation.pk]
    page = client.get(reverse("chat:search"), {"q": "회의"})
    assert page.status_code == 200 and "회의 일정 알려줘" in page.content.decode()


def test_search_of_a_former_member_finds_nothing(client, member, tenant, conversation):
    _chat(conversation, ("user", "secret roadmap"))
    services.remove_member(Membership.objects.get(tenant=tenant, user=member))
    client.force_login(member)
    assert client.get(reverse("chat:search"), {"q": "roadmap"}, **JSON).json()["results"] == []


def test_search_refuses_a_huge_query_and_ignores_a_blank_one(client, member):
    client.force_login(member)
    huge = client.get(reverse("chat:search"), {"q": "x" * 201}, **JSON)
    assert huge.status_code == 400 and "200" in huge.json()["error"]["message"]
    assert client.get(reverse("chat:search"), {"q": "   "}, **JSON).json()["results"] == []


def test_search_on_postgresql_is_full_text(client, member, conversation):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("full-text search: PostgreSQL only (DATABASE_URL=postgres://...)")
    _chat(conversation, ("user", "deploy the staging cluster tonight"), ("assistant", "ok"))
    client.force_login(member)
    found = lambda q: [r["id"] for r in client.get(reverse("chat:search"), {"q": q}, **JSON).json()["results"]]  # noqa: E731
    assert found("staging tonight") == [conversation.pk]  # words in any order: not a substring match
    assert found('"tonight staging"') == []  # a quoted phrase keeps its order
    assert found("staging -cluster") == []  # websearch exclusion


# --- nothing of others' --------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "method", "data"), [
    ("chat:rename", "post", {"title": "mine now"}),
    ("chat:pin", "post", {"pinned": "1"}),
    ("chat:export_md", "get", {}),
    ("chat:delete", "post", {}),
])
def test_others_conversations_are_404(client, member, strangers, name, method, data):
    client.force_login(member)
    for theirs in strangers:
        before = Conversation.objects.get(pk=theirs.pk)
        response = getattr(client, method)(reverse(name, args=[theirs.pk]), data, **JSON)
        assert response.status_code == 404, (name, theirs)
        after = Conversation.objects.get(pk=theirs.pk)
        assert (after.title, after.is_pinned) == (before.title, before.is_pinned)
    assert getattr(client, method)(reverse(name, args=[999999]), data).status_code == 404


def test_new_urls_need_a_login(client, conversation):
    for url in (reverse("chat:search"), reverse("chat:export_md", args=[conversation.pk])):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert client.post(reverse("chat:rename", args=[conversation.pk]), {"title": "x"}).status_code == 302
    assert Conversation.objects.get(pk=conversation.pk).title == ""
