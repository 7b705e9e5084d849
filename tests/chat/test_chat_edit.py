"""Editing a sent message forks the conversation (chat.branches): the edited message becomes a sibling
of the old one, the old branch and its later turns stay, and the prompt is always the path to where a
turn goes. What the model sees is checked on the plan each turn builds (services.plan_turn), the rows
on what begin_turn saves; one turn per kind runs against the real engine over the socket. A message
of another conversation is never reachable: the socket's "unknown_message" error (its 404)."""
import pytest
from django.apps import apps as django_apps
from django.urls import reverse

from chat import history, selectors, services
from chat.errors import ChatError
from chat.models import Message
from chat_testing import chat_socket, db, frames_until_end, next_frame, send

migration = __import__("chat.migrations.0004_message_parent", fromlist=["link_existing_messages"])


def _say(conversation, content, parent=history.LAST):
    return history.add_user_message(conversation, content, parent=parent)


def _answer(conversation, content, parent=history.LAST):
    reply = history.create_pending_reply(conversation, profile=None, system_prompt=None, parent=parent)
    return history.finish_reply(reply, content=content, status=Message.Status.COMPLETE, finish_reason="stop")


@pytest.fixture
def line(conversation):
    """u1 a1 u2 a2 u3 a3, one branch."""
    rows = {}
    for i in (1, 2, 3):
        rows[f"u{i}"] = _say(conversation, f"question {i}")
        rows[f"a{i}"] = _answer(conversation, f"answer {i}")
    return rows


def _contents(turns) -> list[str]:
    return [t["content"] for t in turns]


def _turn(member, conversation, content="", **where):
    """Plan and save a turn as the socket does, finishing its reply with `content` ("re: " + the question)."""
    plan = services.plan_turn(member, conversation.pk, content=content or None, profile_name=None, **where)
    turn = services.begin_turn(plan, "req")
    text = "re: " + plan.turns[-1]["content"]
    history.finish_reply(turn.reply, content=text, status=Message.Status.COMPLETE, finish_reason="stop")
    return plan, turn


def test_an_edit_is_a_new_branch_and_the_model_sees_only_the_path_to_it(member, conversation, line):
    plan, turn = _turn(member, conversation, "question 2, sharper", edit_of=line["u2"].pk)
    assert _contents(plan.turns) == ["question 1", "answer 1", "question 2, sharper"]
    assert turn.user_message.parent_id == line["a1"].pk and turn.reply.parent_id == turn.user_message.pk
    shown = selectors.thread(conversation)
    assert [m.content for m in shown] == ["question 1", "answer 1", "question 2, sharper", "re: question 2, sharper"]
    assert Message.objects.filter(conversation=conversation).count() == 8  # the old branch is kept whole
    plan, _ = _turn(member, conversation, "question 4")  # a new message goes on after the newest branch
    assert _contents(plan.turns) == [*[m.content for m in shown], "question 4"]


def test_a_turn_can_go_on_in_an_older_branch(member, conversation, line):
    _turn(member, conversation, "question 2, sharper", edit_of=line["u2"].pk)
    plan, turn = _turn(member, conversation, "question 4", parent_id=line["a3"].pk)
    assert _contents(plan.turns) == ["question 1", "answer 1", "question 2", "answer 2", "question 3", "answer 3",
                                     "question 4"]
    assert [m.pk for m in selectors.thread(conversation)][-3:] == [line["a3"].pk, turn.user_message.pk, turn.reply.pk]
    plan, turn = _turn(member, conversation, answer_id=line["u2"].pk)  # regenerate inside the old branch
    assert _contents(plan.turns) == ["question 1", "answer 1", "question 2"] and turn.reply.parent_id == line["u2"].pk
    plan, turn = _turn(member, conversation)  # regenerate, by default the current branch's last question
    assert _contents(plan.turns) == ["question 1", "answer 1", "question 2"] and turn.user_message is None


def test_editing_the_first_message_starts_a_new_first_message(member, conversation, line):
    plan, turn = _turn(member, conversation, "question 1 again", edit_of=line["u1"].pk)
    assert _contents(plan.turns) == ["question 1 again"] and turn.user_message.parent_id is None
    assert [m.content for m in selectors.thread(conversation)] == ["question 1 again", "re: question 1 again"]
    conversation.refresh_from_db()
    assert conversation.title == "question 1"  # the title stays the first message's


def test_the_page_carries_every_branch_with_the_current_one_shown(client, member, conversation, line):
    _turn(member, conversation, "question 2, sharper", edit_of=line["u2"].pk)
    client.force_login(member)
    html = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()

    def article(text):
        at = html.index(f">{text}<")
        return html[html.rindex("<article", 0, at):at]

    old, new = article("question 2"), article("question 2, sharper")
    assert f'data-parent="{line["a1"].pk}" hidden' in old and f'data-parent="{line["a1"].pk}">' in new
    assert " hidden" in article("answer 3") and " hidden" not in article("re: question 2, sharper")
    export = client.get(reverse("chat:export_md", args=[conversation.pk])).content.decode()
    assert "question 2, sharper" in export and "answer 3" not in export  # the current branch


@pytest.mark.parametrize("where", ["edit_of", "parent_id", "answer_id"])
def test_messages_of_other_conversations_are_unknown(member, tenant, make_user, conversation, line, where):
    colleague = make_user("colleague", tenant)
    theirs = history.create_conversation(tenant, colleague)
    foreign_question = _say(theirs, "colleague's secret")
    mine_elsewhere = history.create_conversation(tenant, member)
    _say(mine_elsewhere, "my other chat")
    content = None if where == "answer_id" else "edited"
    for message_id in (foreign_question.pk, Message.objects.filter(conversation=mine_elsewhere).get().pk, 10**9):
        with pytest.raises(ChatError) as error:
            services.plan_turn(member, conversation.pk, content=content, profile_name=None, **{where: message_id})
        assert error.value.code == "unknown_message"
    if where != "parent_id":  # a reply is not a message of yours to edit or to answer again
        with pytest.raises(ChatError, match="no message of yours"):
            services.plan_turn(member, conversation.pk, content=content, profile_name=None, **{where: line["a1"].pk})


def test_conversations_written_before_branches_get_their_parents(member, conversation):
    rows = [Message.objects.create(conversation=conversation, role=role, content=text)  # no parents, as before
            for role, text in [("user", "q1"), ("assistant", "a1"), ("assistant", "a1 again"), ("user", "q2"),
                               ("assistant", "a2")]]
    migration.link_existing_messages(django_apps, None)
    parents = [Message.objects.get(pk=m.pk).parent_id for m in rows]
    assert parents == [None, rows[0].pk, rows[0].pk, rows[2].pk, rows[3].pk]
    assert [m.content for m in selectors.thread(conversation)] == ["q1", "a1 again", "q2", "a2"]


# --- over the socket ------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
async def test_an_edit_frame_for_a_message_of_someone_else_saves_nothing(member, tenant, make_user, conversation,
                                                                         session_key):
    colleague = await db(make_user)("colleague", tenant)
    theirs = await db(history.create_conversation)(tenant, colleague)
    secret = await db(_say)(theirs, "colleague's secret")
    key = await db(session_key)(member)
    before = await db(Message.objects.count)()
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "edit", "message_id": secret.pk, "content": "mine now"})
        assert (await next_frame(communicator, timeout=10))["code"] == "unknown_message"
        await send(communicator, {"type": "edit", "content": "which one?"})
        assert (await next_frame(communicator, timeout=10))["code"] == "invalid_frame"
        await send(communicator, {"type": "user_message", "content": "hi", "parent_id": "12"})
        assert (await next_frame(communicator, timeout=10))["code"] == "invalid_frame"
    assert await db(Message.objects.count)() == before


@pytest.mark.django_db(transaction=True)
async def test_edit_and_resend_against_the_engine(engine, conversation, member, session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "user_message", "content": "Name one colour."})
        first = await frames_until_end(communicator)
        await send(communicator, {"type": "edit", "message_id": first[0]["user_message_id"],
                                  "content": "Name one fruit."})
        second = await frames_until_end(communicator)
    assert first[-1]["type"] == second[-1]["type"] == "done"
    assert second[0]["user_message_id"] not in (None, first[0]["user_message_id"])
    shown = await db(lambda: [(m.role, m.content) for m in selectors.thread(conversation)])()
    assert shown[0] == ("user", "Name one fruit.") and len(shown) == 2
    usage = second[-1]["usage"]
    assert usage["prompt_tokens"] == len(engine.encode_chat([{"role": "user", "content": "Name one fruit."}]))
    assert await db(Message.objects.filter(conversation=conversation).count)() == 4
