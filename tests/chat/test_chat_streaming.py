"""The chat protocol against the real engine (SmolLM2 on the CPU, loaded once per session): streaming,
usage, the system prompt's pinned prefix, stop, close, regenerate, Korean, and too-long prompts.
Replies are kept to a few tokens; `long` (48 tokens, no EOS) is only used to stop one mid-way."""
import asyncio

import pytest

from chat import history
from chat import selectors as chat_selectors
from chat.models import Conversation, Message
from chat_testing import chat_socket, db, first_delta, frames_until_end, next_frame, send, texts, wait_for
from tenants import services

pytestmark = pytest.mark.django_db(transaction=True)


@db
def _messages(conversation_id: int) -> list[Message]:
    return list(Message.objects.filter(conversation_id=conversation_id).order_by("created_at", "id"))


@db
def _conversation(conversation_id: int) -> Conversation:
    return Conversation.objects.select_related("profile").get(pk=conversation_id)


def _idle(engine) -> bool:
    stats = engine.stats()
    return stats["num_blocks_used"] == 0 and stats["num_running"] == 0 and stats["num_waiting"] == 0


async def test_reply_streams_deltas_that_add_up_to_the_saved_reply(engine, conversation, member, session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "user_message", "content": "Name one colour."})
        frames = await frames_until_end(communicator)

    start, *deltas, done = frames
    assert start["type"] == "start" and start["title"] == "Name one colour." and start["profile"] == "quick"
    assert deltas and all(f["type"] == "delta" and f["text"] for f in deltas)
    assert done["type"] == "done" and done["status"] == "complete" and done["finish_reason"] in ("stop", "length")
    user, reply = await _messages(conversation.pk)
    assert (user.pk, reply.pk) == (start["user_message_id"], start["message_id"]) == (user.pk, done["message_id"])
    assert user.role == "user" and user.content == "Name one colour."
    assert reply.role == "assistant" and reply.status == Message.Status.COMPLETE
    assert reply.content == texts(deltas)
    usage = done["usage"]
    assert usage == {"prompt_tokens": reply.num_prompt_tokens, "completion_tokens": reply.num_output_tokens,
                     "cached_tokens": reply.num_cached_tokens}
    assert usage["prompt_tokens"] == len(engine.encode_chat([{"role": "user", "content": "Name one colour."}]))
    assert 0 < usage["completion_tokens"] <= 6 and len(deltas) <= usage["completion_tokens"]
    assert reply.request_id.startswith(f"chat-{conversation.pk}-") and reply.duration_ms is not None
    assert (await _conversation(conversation.pk)).profile.name == "quick"
    assert _idle(engine)


async def test_system_prompt_is_applied_and_hits_the_pinned_prefix(engine, tenant, conversation, member, session_key):
    text = "You are Acme's internal assistant. Answer briefly and politely. " * 4
    prompt = await db(services.create_system_prompt)(tenant, text)  # pinned on commit
    pinned = engine.pins()["tenant:chat-acme"]
    assert pinned.num_tokens >= 16
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "user_message", "content": "Hi"})
        done = (await frames_until_end(communicator))[-1]
    assert done["type"] == "done"
    expected = engine.encode_chat([{"role": "system", "content": text}, {"role": "user", "content": "Hi"}])
    assert done["usage"]["prompt_tokens"] == len(expected)
    assert done["usage"]["cached_tokens"] >= pinned.num_tokens
    reply = (await _messages(conversation.pk))[-1]
    assert reply.system_prompt_id == prompt.pk


async def test_stop_mid_reply_saves_the_partial_reply_and_frees_the_blocks(engine, conversation, member, session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "user_message", "content": "Tell me a long story.", "profile": "long"})
        before = await first_delta(communicator)
        await send(communicator, {"type": "user_message", "content": "and another"})  # one reply at a time
        await send(communicator, {"type": "stop"})
        after = await frames_until_end(communicator, end=("done",))
    assert [f["code"] for f in after if f["type"] == "error"] == ["busy"]
    done = after[-1]
    assert done["status"] == "stopped" and done["finish_reason"] == "abort"
    assert done["usage"]["completion_tokens"] < 48
    user, reply = await _messages(conversation.pk)
    assert reply.status == Message.Status.STOPPED and reply.finish_reason == "abort"
    assert reply.content == texts(before + after) and reply.content
    assert reply.num_output_tokens == done["usage"]["completion_tokens"]
    assert _idle(engine)  # the abort freed the request's blocks before the final delta came back


async def test_closing_the_socket_aborts_the_request_and_keeps_the_partial_reply(engine, conversation, member,
                                                                                 session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "user_message", "content": "Count slowly to fifty.", "profile": "long"})
        before = await first_delta(communicator)
        assert engine.stats()["num_running"] == 1
    # chat_socket disconnected: the consumer aborted at once and saved before it returned.
    assert await wait_for(lambda: _idle(engine), timeout=5)
    user, reply = await _messages(conversation.pk)
    assert user.content == "Count slowly to fifty."
    assert reply.status == Message.Status.STOPPED and reply.finish_reason == "abort"
    assert reply.content.startswith(texts(before)) and 0 < reply.num_output_tokens < 48


async def test_regenerate_replaces_the_last_reply(engine, conversation, member, session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "user_message", "content": "Say hello."})
        first = await frames_until_end(communicator)
        await send(communicator, {"type": "regenerate", "profile": "long"})
        start = await next_frame(communicator)
        assert start["type"] == "start" and start["user_message_id"] is None and start["profile"] == "long"
        await first_delta(communicator)
        await send(communicator, {"type": "stop"})
        second = await frames_until_end(communicator)
    assert first[-1]["type"] == second[-1]["type"] == "done"
    assert first[-1]["usage"]["prompt_tokens"] == second[-1]["usage"]["prompt_tokens"]  # the same question again
    rows = await _messages(conversation.pk)
    assert [m.role for m in rows] == ["user", "assistant", "assistant"]  # the first reply stays (usage)
    shown = await db(chat_selectors.thread)(await _conversation(conversation.pk))
    assert [m.pk for m in shown] == [rows[0].pk, start["message_id"]]


async def test_korean_round_trip(engine, conversation, member, session_key):
    content = "안녕하세요! 서울의 오늘 날씨를 한 문장으로 알려 주세요. 🙂"
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "user_message", "content": content})
        raw_start = await communicator.receive_from(timeout=60)
        frames = await frames_until_end(communicator)
    assert content in raw_start  # sent as UTF-8 text, not \u escapes
    assert frames[-1]["type"] == "done"
    user, reply = await _messages(conversation.pk)
    assert user.content == content
    assert (await _conversation(conversation.pk)).title == content
    assert reply.content == texts(frames)
    assert "\ufffd" not in reply.content  # no character broken between two deltas

    @db
    def page() -> str:
        from django.test import Client

        client = Client()
        client.force_login(member)
        return client.get(f"/chat/{conversation.pk}/").content.decode()

    assert content in await page()


async def test_prompt_longer_than_the_context_gets_an_error_frame(engine, conversation, member, session_key, settings):
    settings.PAGODA_CHAT_MAX_MESSAGE_CHARS = 200_000
    content = "안녕하세요 여러분 " * (engine.max_model_len // 2)
    assert engine.count_tokens(content) > engine.max_model_len
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "user_message", "content": content})
        frame = await next_frame(communicator)
    assert frame["type"] == "error" and frame["code"] == "context_length_exceeded", frame
    assert await _messages(conversation.pk) == []
    assert _idle(engine)


async def test_two_sockets_of_one_user_stream_side_by_side(engine, tenant, member, session_key):
    one, two = [await db(history.create_conversation)(tenant, member) for _ in range(2)]
    key = await db(session_key)(member)
    async with chat_socket(one.pk, key) as (a, _), chat_socket(two.pk, key) as (b, _):
        await send(a, {"type": "user_message", "content": "One?"})
        await send(b, {"type": "user_message", "content": "Two?"})
        ends = await asyncio.gather(frames_until_end(a), frames_until_end(b))
    assert [frames[-1]["type"] for frames in ends] == ["done", "done"]
    assert [m.content for m in await _messages(one.pk)][0] == "One?"
    assert [m.content for m in await _messages(two.pk)][0] == "Two?"
