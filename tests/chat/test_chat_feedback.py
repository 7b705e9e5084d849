"""Thumbs up / down on replies (POST /chat/<id>/messages/<message_id>/feedback/) and the console's
reply quality per system-prompt version and per sampling profile, summed from real rows.
Nothing of another user's or tenant's can be rated: a 404, as a missing reply."""
import pytest
from django.urls import reverse

from chat import history, reply_quality
from chat.models import Feedback, Message
from tenants import selectors as tenant_selectors, services
from tenants.models import Membership, SamplingProfile

JSON = {"HTTP_ACCEPT": "application/json"}


def _reply(conversation, text="an answer", *, profile=None, system_prompt=None, status=Message.Status.COMPLETE,
           num_output_tokens=0, ttft_ms=None):
    history.add_user_message(conversation, "a question")
    reply = history.create_pending_reply(conversation, profile=profile, system_prompt=system_prompt)
    if status != Message.Status.PENDING:
        history.finish_reply(reply, content=text, status=status, finish_reason="stop",
                             num_output_tokens=num_output_tokens, time_to_first_token_ms=ttft_ms)
    return reply


def _url(reply):
    return reverse("chat:feedback", args=[reply.conversation_id, reply.pk])


def test_a_rating_is_saved_changed_and_taken_back(client, member, conversation):
    reply = _reply(conversation)
    client.force_login(member)
    up = client.post(_url(reply), {"rating": "up"}, **JSON)
    assert up.status_code == 200 and up.json() == {"message_id": reply.pk, "rating": "up", "comment": ""}
    down = client.post(_url(reply), {"rating": "down", "comment": "  틀린 날짜를 말했어요  "}, **JSON)
    assert down.json() == {"message_id": reply.pk, "rating": "down", "comment": "틀린 날짜를 말했어요"}
    row = Feedback.objects.get()  # changed in place: one row per user and reply
    assert (row.message_id, row.user_id, row.rating, row.comment) == (reply.pk, member.pk, -1, "틀린 날짜를 말했어요")
    page = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert 'data-feedback="down" data-feedback-comment="틀린 날짜를 말했어요"' in page
    exported = client.get(reverse("governance:export_one", args=[conversation.pk])).json()
    assert exported["conversations"][0]["messages"][1]["feedback"] == {"rating": "down", "comment": "틀린 날짜를 말했어요"}
    cleared = client.post(_url(reply), {"rating": ""}, **JSON)
    assert cleared.json() == {"message_id": reply.pk, "rating": None, "comment": ""}
    assert not Feedback.objects.exists()


@pytest.mark.parametrize(("fields", "field"), [
    ({"rating": "meh"}, "rating"),
    ({"rating": "up", "comment": "x" * (Feedback.MAX_COMMENT_CHARS + 1)}, "comment"),
    ({"rating": "", "comment": "a comment without a rating"}, "comment"),
])
def test_bad_feedback_is_a_400_with_the_field(client, member, conversation, fields, field):
    reply = _reply(conversation)
    client.force_login(member)
    response = client.post(_url(reply), fields, **JSON)
    assert response.status_code == 400 and response.json()["error"]["field"] == field
    assert not Feedback.objects.exists()


@pytest.mark.parametrize("status", [Message.Status.PENDING, Message.Status.ERROR])
def test_a_reply_still_written_or_failed_cannot_be_rated(client, member, conversation, status):
    reply = _reply(conversation, status=status)
    client.force_login(member)
    assert client.post(_url(reply), {"rating": "up"}, **JSON).status_code == 400


def test_nobody_else_can_rate_a_reply(client, tenant, other_tenant, member, make_user, conversation):
    reply = _reply(conversation)
    user_message = Message.objects.get(conversation=conversation, role=Message.Role.USER)
    mine = history.create_conversation(tenant, member)
    for stranger in (make_user("colleague", tenant), make_user("outsider", other_tenant)):
        client.force_login(stranger)
        assert client.post(_url(reply), {"rating": "down"}, **JSON).status_code == 404
    client.force_login(member)
    assert client.post(reverse("chat:feedback", args=[conversation.pk, user_message.pk]), {"rating": "up"}).status_code == 404
    assert client.post(reverse("chat:feedback", args=[mine.pk, reply.pk]), {"rating": "up"}).status_code == 404  # wrong conversation
    assert client.get(_url(reply)).status_code == 405
    services.remove_member(Membership.objects.get(tenant=tenant, user=member))
    assert client.post(_url(reply), {"rating": "up"}, **JSON).status_code == 404  # left the tenant
    assert not Feedback.objects.exists()


# --- reply quality --------------------------------------------------------------------------------------
@pytest.fixture
def rated_tenant(tenant, member, make_user):
    """Prompt v1 then v2, profiles quick and long; replies of two users, with lengths, TTFTs and ratings."""
    v1 = services.create_system_prompt(tenant, "You are terse.")
    v2 = services.create_system_prompt(tenant, "You are helpful and precise.")
    quick = tenant_selectors.profile_by_name(tenant, "quick")
    long = tenant_selectors.profile_by_name(tenant, "long")
    other = make_user("jun", tenant)
    mine, theirs = history.create_conversation(tenant, member), history.create_conversation(tenant, other)

    def rated(conversation, user, rating, **fields):
        reply = _reply(conversation, **fields)
        if rating:
            Feedback.objects.create(message=reply, user=user, rating=rating)
        return reply

    up, down = Feedback.Rating.UP, Feedback.Rating.DOWN
    rated(mine, member, down, system_prompt=v1, profile=quick, num_output_tokens=10, ttft_ms=100)
    rated(mine, member, up, system_prompt=v1, profile=quick, num_output_tokens=20, ttft_ms=300)
    rated(mine, member, None, system_prompt=v1, profile=long, num_output_tokens=60, ttft_ms=None)
    rated(mine, member, up, system_prompt=v2, profile=quick, num_output_tokens=30, ttft_ms=50)
    rated(theirs, other, up, system_prompt=v2, profile=long, num_output_tokens=50, ttft_ms=70,
          status=Message.Status.STOPPED)
    rated(theirs, other, None, system_prompt=v2, profile=long, status=Message.Status.ERROR)  # failed: left out
    rated(theirs, other, None, system_prompt=None, profile=None, num_output_tokens=7, ttft_ms=9)
    return v1, v2


def test_quality_per_prompt_version_from_real_rows(rated_tenant, tenant, other_tenant, make_user):
    foreign = history.create_conversation(other_tenant, make_user("outsider", other_tenant))
    Feedback.objects.create(message=_reply(foreign, num_output_tokens=999), user=foreign.user, rating=-1)  # not counted
    rows = reply_quality.by_prompt_version(tenant)
    assert rows == [
        {"version": 2, "num_replies": 2, "num_up": 2, "num_down": 0, "num_rated": 2, "up_rate": 1.0,
         "mean_output_tokens": 40.0, "mean_ttft_ms": 60.0},
        {"version": 1, "num_replies": 3, "num_up": 1, "num_down": 1, "num_rated": 2, "up_rate": 0.5,
         "mean_output_tokens": 30.0, "mean_ttft_ms": 200.0},
        {"version": None, "num_replies": 1, "num_up": 0, "num_down": 0, "num_rated": 0, "up_rate": None,
         "mean_output_tokens": 7.0, "mean_ttft_ms": 9.0},
    ]


def test_quality_per_profile_from_real_rows(rated_tenant, tenant):
    rows = {row["profile"]: row for row in reply_quality.by_profile(tenant)}
    assert list(rows) == ["long", "quick", None]
    assert rows["quick"] == {"profile": "quick", "num_replies": 3, "num_up": 2, "num_down": 1, "num_rated": 3,
                             "up_rate": 2 / 3, "mean_output_tokens": 20.0, "mean_ttft_ms": 150.0}
    assert rows["long"] == {"profile": "long", "num_replies": 2, "num_up": 1, "num_down": 0, "num_rated": 1,
                            "up_rate": 1.0, "mean_output_tokens": 55.0, "mean_ttft_ms": 70.0}
    SamplingProfile.objects.filter(tenant=tenant, name="long").delete()  # its replies stay, under no name
    assert [row["profile"] for row in reply_quality.by_profile(tenant)] == ["quick", None]


def test_two_users_rating_one_reply_count_twice_but_the_reply_once(tenant, member, make_user, conversation):
    reply = _reply(conversation, system_prompt=services.create_system_prompt(tenant, "Hi."), num_output_tokens=8)
    Feedback.objects.create(message=reply, user=member, rating=1)
    Feedback.objects.create(message=reply, user=make_user("auditor", tenant), rating=-1)
    [row] = reply_quality.by_prompt_version(tenant)
    assert (row["num_replies"], row["num_up"], row["num_down"], row["mean_output_tokens"]) == (1, 1, 1, 8.0)


def test_the_console_shows_reply_quality_to_the_tenant_admin(client, rated_tenant, tenant, make_user):
    admin = make_user("boss")
    services.add_member(tenant, admin, role=Membership.Role.ADMIN)
    client.force_login(admin)
    html = client.get(reverse("console:tenant", args=[tenant.slug])).content.decode()
    section = html[html.index('id="reply-quality"'):html.index("Sampling profiles</h2>")]
    assert "v2 (active)" in section and "<b>100%</b>" in section and "<b>50%</b>" in section
    assert "40 tokens" in section and "200 ms" in section and "<b>67%</b>" in section


def test_the_admin_lists_comments_of_the_admins_tenants_only(client, tenant, other_tenant, member, make_user,
                                                             conversation):
    Feedback.objects.create(message=_reply(conversation), user=member, rating=-1, comment="acme: wrong date")
    foreign = history.create_conversation(other_tenant, make_user("outsider", other_tenant))
    Feedback.objects.create(message=_reply(foreign), user=foreign.user, rating=-1, comment="globex: secret")
    admin = make_user("boss")
    services.add_member(tenant, admin, role=Membership.Role.ADMIN)
    client.force_login(admin)
    page = client.get(reverse("admin:chat_feedback_changelist")).content.decode()
    assert "acme: wrong date" in page and "globex: secret" not in page
