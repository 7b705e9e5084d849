"""A reply whose final save fails, on every path that ends a reply (an answer, regenerate, stop, a
closed socket), and a socket that is gone mid-send; against the real engine. The database going
away for real (PostgreSQL) is tests/reliability/test_faults_database.py."""
import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError
from django.test import Client

from chat import consumers
from chat import history
from chat import services as chat_services
from chat.models import Message
from chat_testing import chat_socket, db, first_delta, frames_until_end, send, texts, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def failing_saves(monkeypatch):
    """failing_saves(n): the next n finish_turn calls raise as a vanished database would; returns the
    counts (calls["n"]: finish_turn calls since)."""
    monkeypatch.setattr(consumers, "SAVE_RETRY_DELAY_S", 0.05)
    real = chat_services.finish_turn
    calls = {"n": 0, "failing": 0}

    def finish_turn(*args, **kwargs):
        calls["n"] += 1
        if calls["failing"] > 0:
            calls["failing"] -= 1
            raise OperationalError("server closed the connection unexpectedly")
        return real(*args, **kwargs)

    monkeypatch.setattr(chat_services, "finish_turn", finish_turn)

    def arm(n: int) -> dict:
        calls.update(n=0, failing=n)
        return calls

    return arm


@db
def _reply(message_id: int) -> Message:
    return Message.objects.get(pk=message_id)


@db
def _open_page(user, conversation_id: int) -> str:
    client = Client()
    client.force_login(user)
    return client.get(f"/chat/{conversation_id}/").content.decode()


async def _answer(communicator) -> list[dict]:
    await send(communicator, {"type": "user_message", "content": "Name one colour."})
    return await frames_until_end(communicator)


async def _regenerate(communicator) -> list[dict]:
    await send(communicator, {"type": "regenerate"})
    return await frames_until_end(communicator)


async def _stop(communicator) -> list[dict]:
    await send(communicator, {"type": "user_message", "content": "Tell me a long story.", "profile": "long"})
    frames = await first_delta(communicator)
    await send(communicator, {"type": "stop"})
    return frames + await frames_until_end(communicator)


async def test_a_save_that_fails_once_is_tried_again_and_the_reply_kept(engine, conversation, member, session_key,
                                                                       failing_saves):
    calls = failing_saves(1)
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        frames = await _answer(communicator)
    assert frames[-1]["type"] == "done" and calls["n"] == 2
    reply = await _reply(frames[-1]["message_id"])
    assert reply.status == Message.Status.COMPLETE and reply.content == texts(frames)


@pytest.mark.parametrize("end_turn", [_answer, _regenerate, _stop], ids=["answer", "regenerate", "stop"])
async def test_a_reply_that_cannot_be_saved_ends_with_an_error_frame_then_is_failed_once_stale(
        engine, conversation, member, session_key, failing_saves, settings, end_turn):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        if end_turn is _regenerate:
            assert (await _answer(communicator))[-1]["type"] == "done"
        calls = failing_saves(2)  # the save and its retry: the database stays away
        frames = await end_turn(communicator)
        assert calls["n"] == 2 and calls["failing"] == 0
        end = frames[-1]
        assert end["type"] == "error" and end["code"] == "reply_not_saved", frames  # never "done"
        assert [f["type"] for f in frames].count("done") == 0
        assert end["message_id"] == frames[0]["message_id"]  # the page marks that reply failed
        # The socket stays usable: the next turn saves normally.
        assert (await _answer(communicator))[-1]["type"] == "done"

    reply = await _reply(end["message_id"])
    assert reply.status == Message.Status.PENDING  # nothing could be written
    await _open_page(member, conversation.pk)  # young: it could still be streaming elsewhere
    assert (await _reply(reply.pk)).status == Message.Status.PENDING
    settings.PAGODA_CHAT_STALE_REPLY_SECONDS = 0
    page = await _open_page(member, conversation.pk)
    assert chat_services.STALE_REPLY_ERROR in page  # shown failed, no longer "Incomplete"
    assert (await _reply(reply.pk)).status == Message.Status.PENDING  # a page view writes nothing
    async with chat_socket(conversation.pk, key) as (communicator, _):
        assert (await _answer(communicator))[-1]["type"] == "done"  # the next turn stores it failed
    reply = await _reply(reply.pk)
    assert reply.status == Message.Status.ERROR and reply.error == chat_services.STALE_REPLY_ERROR


async def test_a_closed_socket_whose_save_fails_leaves_the_reply_to_the_sweep(engine, conversation, member,
                                                                             session_key, failing_saves, settings):
    key = await db(session_key)(member)
    calls = failing_saves(2)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "user_message", "content": "Count slowly to fifty.", "profile": "long"})
        start = (await first_delta(communicator))[0]
    assert await wait_for(lambda: calls["n"] == 2, timeout=10)  # the consumer tried twice while closing
    assert (await _reply(start["message_id"])).status == Message.Status.PENDING
    settings.PAGODA_CHAT_STALE_REPLY_SECONDS = 0
    assert chat_services.STALE_REPLY_ERROR in await _open_page(member, conversation.pk)
    assert (await _reply(start["message_id"])).status == Message.Status.PENDING
    out = io.StringIO()
    await db(call_command)("fail_stale_replies", stdout=out)  # its default bound: the setting, now 0 s
    assert out.getvalue().strip() == "1 stale reply marked failed"
    assert (await _reply(start["message_id"])).status == Message.Status.ERROR


async def test_a_socket_gone_mid_send_stops_the_reply(engine, conversation, member, session_key, monkeypatch):
    """daphne raises from send() when the client dropped before its disconnect arrived: that is a close."""
    real_send = consumers.ChatConsumer.send
    sent = {"deltas": 0}

    async def send_until_gone(self, text_data=None, **kwargs):
        if '"type": "delta"' in (text_data or ""):
            sent["deltas"] += 1
            if sent["deltas"] > 1:
                raise ConnectionError("Attempt to send on a closed protocol")
        return await real_send(self, text_data=text_data, **kwargs)

    monkeypatch.setattr(consumers.ChatConsumer, "send", send_until_gone)
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "user_message", "content": "Count slowly to fifty.", "profile": "long"})
        start, delta = await first_delta(communicator)
        assert await wait_for(lambda: Message.objects.get(pk=start["message_id"]).status != "pending", timeout=30)
    reply = await _reply(start["message_id"])
    assert reply.status == Message.Status.STOPPED and reply.finish_reason == "abort", (reply.status, reply.error)
    assert reply.content.startswith(delta["text"]) and 0 < reply.num_output_tokens < 48
    assert engine.stats()["num_running"] == 0


def test_only_stale_pending_replies_are_failed(tenant, member, conversation):
    other = history.create_conversation(tenant, member)
    history.add_user_message(conversation, "Hi")
    old, young, done = (history.create_pending_reply(conversation, profile=None, system_prompt=None)
                        for _ in range(3))
    history.finish_reply(done, content="Hello", status=Message.Status.COMPLETE)
    elsewhere = history.create_pending_reply(other, profile=None, system_prompt=None)
    Message.objects.filter(pk__in=[old.pk, done.pk, elsewhere.pk]).update(
        created_at=old.created_at - timedelta(hours=2))
    assert chat_services.fail_stale_replies(3600, conversation) == 1
    status = dict(Message.objects.values_list("pk", "status"))
    assert status[old.pk] == Message.Status.ERROR and status[young.pk] == Message.Status.PENDING
    assert status[done.pk] == Message.Status.COMPLETE and status[elsewhere.pk] == Message.Status.PENDING
    assert chat_services.fail_stale_replies(3600) == 1  # every conversation: the other one's
    assert Message.objects.get(pk=elsewhere.pk).status == Message.Status.ERROR
    with pytest.raises(CommandError, match="older-than"):
        call_command("fail_stale_replies", "--older-than", "-1")
    # A reply that was only slow, not lost, is saved over the error when it ends.
    old.refresh_from_db()
    history.finish_reply(old, content="Late", status=Message.Status.COMPLETE)
    assert Message.objects.get(pk=old.pk).status == Message.Status.COMPLETE
