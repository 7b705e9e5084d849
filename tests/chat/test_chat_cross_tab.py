"""One reply at a time per conversation across tabs, the other tabs following it live, and a tab opened
mid-reply catching up (a snapshot, then the deltas past it): two sockets
of one user on one conversation, on the real engine, through the in-memory channel layer and (when a
Redis answers at REDIS_URL or 127.0.0.1:6379) through channels-redis; and the reply lease itself
(chat.turn_lock): taken by one owner only, given back, and free again once a dead holder's expires."""
import asyncio
import json
import os
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from chat import turn_lock
from chat.models import Conversation, Message
from chat_testing import chat_socket, db, first_delta, frames_until_end, next_frame, send, texts

REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"


def _redis_reachable() -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping())
    except Exception:  # noqa: BLE001 - not installed, not running
        return False


@pytest.fixture(params=["memory", "redis"])
def channel_layer(request, settings):
    """The in-memory layer, or channels-redis with a prefix of its own (other test runs may share the Redis)."""
    if request.param == "redis":
        if not _redis_reachable():
            pytest.skip(f"needs Redis at {REDIS_URL}")
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {
            "hosts": [REDIS_URL], "prefix": f"pagoda-test-{uuid.uuid4().hex[:8]}"}}}
    else:
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": "pagoda.channel_layer.InMemoryChannelLayer"}}
    return request.param


@db
def _messages(conversation_id: int) -> list[Message]:
    return list(Message.objects.filter(conversation_id=conversation_id).order_by("created_at", "id"))


async def _set_up(communicator) -> None:
    """Until the socket has set itself up (groups joined, access read again): a frame is answered only
    after that, and a bad one gets its error."""
    await send(communicator, "{broken")
    assert (await next_frame(communicator))["code"] == "invalid_json"


async def _frames_of_followed_reply(communicator) -> list[dict]:
    """A following tab's frames up to the followed reply's done or error (any other frame kept too)."""
    frames = []
    while not frames or not (frames[-1].get("followed") and frames[-1]["type"] in ("done", "error")):
        frames.append(await next_frame(communicator))
    return frames


async def _until_own_error(communicator, frames: list[dict]) -> None:
    """Add a tab's frames to `frames` up to its own next error frame (not a followed one)."""
    while True:
        frames.append(await next_frame(communicator))
        if frames[-1]["type"] == "error" and not frames[-1].get("followed"):
            return


# --- the lease --------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_the_lease_has_one_owner_until_given_back(conversation):
    assert turn_lock.acquire(conversation.pk, "tab-a", 30)
    assert not turn_lock.acquire(conversation.pk, "tab-b", 30)
    assert turn_lock.acquire(conversation.pk, "tab-a", 30)  # the owner renews it
    assert turn_lock.holder(conversation.pk) == "tab-a"
    assert not turn_lock.release(conversation.pk, "tab-b")  # only its owner gives it back
    assert turn_lock.release(conversation.pk, "tab-a")
    assert turn_lock.holder(conversation.pk) is None
    assert turn_lock.acquire(conversation.pk, "tab-b", 30)


@pytest.mark.django_db
def test_a_dead_holders_lease_expires(conversation):
    assert turn_lock.acquire(conversation.pk, "crashed", 30)
    Conversation.objects.filter(pk=conversation.pk).update(reply_lock_expires_at=timezone.now() - timedelta(seconds=1))
    assert turn_lock.holder(conversation.pk) is None
    assert turn_lock.acquire(conversation.pk, "next", 30)
    assert not turn_lock.release(conversation.pk, "crashed")  # the late owner cannot free the new one's
    assert turn_lock.holder(conversation.pk) == "next"


# --- two tabs -----------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
async def test_a_second_tab_is_refused_and_follows_the_reply(engine, channel_layer, conversation, member, session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (a, _), chat_socket(conversation.pk, key) as (b, _):
        await _set_up(b)  # open before the reply starts: it follows it from its start
        await send(a, {"type": "user_message", "content": "Tell me a story.", "profile": "long"})
        own = await first_delta(a)
        followed = []
        for turn in ({"type": "user_message", "content": "Me too"}, {"type": "regenerate"}):
            await send(b, turn)  # each once the last is answered: sent at once, it would find that one running
            await _until_own_error(b, followed)
        if not any(f.get("followed") and f["type"] in ("done", "error") for f in followed):
            followed += await _frames_of_followed_reply(b)
        own += await frames_until_end(a)

        errors = [f for f in followed if f["type"] == "error" and not f.get("followed")]
        assert [f["code"] for f in errors] == ["reply_in_progress", "reply_in_progress"]
        assert "another tab" in errors[0]["message"]
        start = next(f for f in followed if f["type"] == "start")
        assert start["followed"] is True and start["user_content"] == "Tell me a story."
        assert start["message_id"] == own[0]["message_id"] and start["user_message_id"] == own[0]["user_message_id"]
        assert all(f["message_id"] == start["message_id"] for f in followed if f["type"] == "delta")
        done = followed[-1]
        assert done["type"] == "done" and done["status"] == own[-1]["status"] == "complete"
        assert texts(followed) == texts(own) == done["content"]

        # The lease was given back: the second tab now writes its own reply, and the first one follows.
        await send(b, {"type": "user_message", "content": "Now me."})
        mine = await frames_until_end(b)
        theirs = await _frames_of_followed_reply(a)
    assert mine[-1]["type"] == "done" and theirs[-1]["content"] == texts(mine)
    assert theirs[0]["user_content"] == "Now me."
    rows = await _messages(conversation.pk)
    assert [m.content for m in rows if m.role == "user"] == ["Tell me a story.", "Now me."]  # nothing of the refused
    assert rows[1].content == done["content"]
    assert await db(turn_lock.holder)(conversation.pk) is None


@pytest.mark.django_db(transaction=True)
async def test_a_tab_opened_mid_reply_catches_up(engine, channel_layer, conversation, member, session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (a, _):
        await send(a, {"type": "user_message", "content": "Tell me a story.", "profile": "long"})
        own = await first_delta(a)
        own.append(await next_frame(a))  # well into the reply
        async with chat_socket(conversation.pk, key) as (b, _):
            followed = await _frames_of_followed_reply(b)
        own += await frames_until_end(a)

    snapshot, deltas, done = followed[0], followed[1:-1], followed[-1]
    assert snapshot["type"] == "snapshot" and snapshot["followed"] is True
    assert snapshot["message_id"] == own[0]["message_id"] and snapshot["user_message_id"] == own[0]["user_message_id"]
    assert snapshot["user_content"] == "Tell me a story." and snapshot["parent_id"] is None
    assert snapshot["seq"] >= 1 and snapshot["content"].startswith(own[1]["text"])  # it joined mid-reply
    assert all(f["type"] == "delta" and f["message_id"] == snapshot["message_id"] for f in deltas)
    assert [f["seq"] for f in deltas] == list(range(snapshot["seq"] + 1, snapshot["seq"] + 1 + len(deltas)))
    assert done["type"] == "done" and done["status"] == "complete"
    assert snapshot["content"] + texts(deltas) == texts(own) == done["content"]  # nothing lost or doubled


@pytest.mark.django_db(transaction=True)
async def test_a_tab_opened_while_no_reply_runs_gets_no_snapshot(engine, channel_layer, conversation, member,
                                                                 session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (a, _), chat_socket(conversation.pk, key) as (b, _):
        await _set_up(b)
        await send(a, {"type": "user_message", "content": "Hello"})
        own = await frames_until_end(a)
        followed = await _frames_of_followed_reply(b)
    assert [f["type"] for f in followed if f["type"] != "delta"] == ["start", "done"]  # followed from its start
    assert texts(followed) == texts(own) == followed[-1]["content"]


@pytest.mark.django_db(transaction=True)
async def test_stop_from_the_following_tab_stops_the_reply(engine, channel_layer, conversation, member, session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (a, _), chat_socket(conversation.pk, key) as (b, _):
        await send(a, {"type": "user_message", "content": "Count to fifty.", "profile": "long"})
        await first_delta(a)
        while (await next_frame(b))["type"] != "delta":
            pass
        await send(b, {"type": "stop"})
        done = (await frames_until_end(a))[-1]
        followed = (await _frames_of_followed_reply(b))[-1]
    assert done["status"] == followed["status"] == "stopped" and done["usage"]["completion_tokens"] < 48
    assert (await _messages(conversation.pk))[-1].status == Message.Status.STOPPED


@pytest.mark.django_db(transaction=True)
async def test_a_lease_left_by_a_crashed_reply_blocks_only_until_it_expires(engine, conversation, member, session_key):
    await db(turn_lock.acquire)(conversation.pk, "a process that died", 30)
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (a, _):
        await send(a, {"type": "user_message", "content": "Hello?"})
        refused = await next_frame(a)
        await db(lambda: Conversation.objects.filter(pk=conversation.pk).update(
            reply_lock_expires_at=timezone.now() - timedelta(seconds=1)))()
        await send(a, {"type": "user_message", "content": "Hello again?"})
        frames = await frames_until_end(a)
    assert refused["type"] == "error" and refused["code"] == "reply_in_progress"
    assert frames[0]["type"] == "start" and frames[-1]["type"] == "done"
    assert [m.content for m in await _messages(conversation.pk) if m.role == "user"] == ["Hello again?"]


@pytest.mark.django_db(transaction=True)
async def test_a_reply_refused_before_it_starts_gives_the_lease_back(engine, conversation, member, session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (a, _):
        await send(a, {"type": "regenerate"})  # nothing to regenerate yet
        frame = await next_frame(a)
    assert frame["code"] == "nothing_to_regenerate"
    assert await db(turn_lock.holder)(conversation.pk) is None


async def test_followers_stop_telling_once_the_layer_fails(monkeypatch):
    from chat import follow

    monkeypatch.setattr(follow, "SEND_TIMEOUT_S", 0.05)

    class Unreachable:
        num_sends = 0

        async def group_send(self, group, message):
            self.num_sends += 1
            await asyncio.sleep(60)

    layer = Unreachable()
    followers = follow.Followers(layer, 1, "me")
    await followers.tell("{}")
    await followers.tell("{}")  # broken after the first: the reply never waits on it again
    assert followers.broken and layer.num_sends == 1


# --- catching up: the order the layer delivers in ------------------------------------------------------
def _delta(seq: int, text: str, message_id: int = 12) -> str:
    return json.dumps({"type": "delta", "text": text, "followed": True, "message_id": message_id, "seq": seq})


def _shown(frames: list[str]) -> str:
    """What a page shows of the reply from the frames a socket passed on (the snapshot, then deltas)."""
    text = ""
    for frame in map(json.loads, frames):
        text = frame["content"] if frame["type"] == "snapshot" else text + frame.get("text", "")
    return text


def test_catching_up_holds_deltas_until_the_snapshot_and_drops_those_it_covers():
    from chat import follow, protocol

    start = protocol.followed(protocol.start_frame(message_id=12, user_message_id=11, title="t", profile="quick"),
                              user_content="Hi", parent_id=None)
    catching_up = follow.CatchingUp()
    passed = catching_up.on_follow(_delta(3, "c")) + catching_up.on_follow(_delta(4, "d"))  # before the snapshot
    assert passed == []
    passed += catching_up.on_snapshot(protocol.snapshot_frame(start, "abc", 3))  # covers delta 3, not 4
    passed += catching_up.on_follow(_delta(4, "d"))  # a copy the layer delivered late: dropped
    passed += catching_up.on_follow(_delta(5, "e"))
    passed += catching_up.on_follow(_delta(1, "x", message_id=13))  # another reply's: passed on
    assert [json.loads(f)["type"] for f in passed] == ["snapshot", "delta", "delta", "delta"]
    assert _shown(passed[:3]) == "abcde"
    assert not catching_up.finished
    catching_up.on_follow(json.dumps({"type": "done", "followed": True, "message_id": 12, "content": "abcde"}))
    assert catching_up.finished


def test_a_start_that_comes_after_its_snapshot_is_dropped():
    """The writing socket answers a snapshot as soon as its reply has a start, which may be before the
    start's own frame has reached the group: the page gets the reply once, from the snapshot."""
    from chat import follow, protocol

    start = protocol.followed(protocol.start_frame(message_id=12, user_message_id=11, title="t", profile="quick"),
                              user_content="Hi", parent_id=None)
    catching_up = follow.CatchingUp()
    passed = catching_up.on_snapshot(protocol.snapshot_frame(start, "", 0))
    passed += catching_up.on_follow(start) + catching_up.on_follow(_delta(1, "a"))
    assert [json.loads(f)["type"] for f in passed] == ["snapshot", "delta"]


def test_a_socket_with_no_reply_to_catch_up_on_passes_on_what_it_held():
    from chat import follow

    catching_up = follow.CatchingUp()
    assert catching_up.on_follow(_delta(1, "a")) == []
    assert catching_up.give_up() == [_delta(1, "a")]
    assert catching_up.finished and catching_up.on_snapshot("{}") == []


def test_catching_up_without_a_snapshot_passes_everything_on_at_the_end():
    from chat import follow

    catching_up = follow.CatchingUp()
    assert catching_up.on_follow(_delta(1, "a")) == []
    done = json.dumps({"type": "done", "followed": True, "message_id": 12, "content": "a"})
    assert catching_up.on_follow(done) == [_delta(1, "a"), done]  # the end carries the whole text
    assert catching_up.finished and catching_up.on_snapshot("{}") == []  # a late answer is ignored


def test_no_snapshot_without_a_reply_streaming():
    from chat import follow

    followers = follow.Followers(None, 1, "me")
    assert followers.snapshot() is None
