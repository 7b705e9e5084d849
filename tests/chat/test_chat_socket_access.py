"""The socket's gatekeeping and bad input, without a model: who may connect, and what is refused
before anything is saved."""
import json

import pytest

from chat_testing import chat_socket, db, next_frame, runtime_set_aside, send
from chat.models import Message
from tenants import services

pytestmark = pytest.mark.django_db(transaction=True)


def _num_messages() -> int:
    return Message.objects.count()


async def _expect_close(communicator, code: int) -> None:
    output = await communicator.receive_output(timeout=10)
    assert output == {"type": "websocket.close", "code": code}


async def test_unauthenticated_socket_is_closed_with_4401(conversation):
    async with chat_socket(conversation.pk) as (communicator, connected):
        assert connected  # accepted, then closed with the code, so that a browser can read it
        await _expect_close(communicator, 4401)


async def test_someone_elses_conversation_is_closed_with_4403(conversation, other_tenant, make_user, session_key):
    outsider = await db(make_user)("otto", other_tenant)
    key = await db(session_key)(outsider)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await _expect_close(communicator, 4403)


async def test_same_tenant_colleague_is_refused_too(conversation, tenant, make_user, session_key):
    colleague = await db(make_user)("cole", tenant)
    key = await db(session_key)(colleague)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await _expect_close(communicator, 4403)


async def test_a_member_who_left_the_tenant_is_refused(conversation, member, session_key):
    from tenants.models import Membership

    await db(lambda: Membership.objects.filter(user=member).delete())()
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await _expect_close(communicator, 4403)


async def test_unknown_conversation_is_closed_with_4404(member, session_key):
    key = await db(session_key)(member)
    async with chat_socket(999_999, key) as (communicator, _):
        await _expect_close(communicator, 4404)


async def test_foreign_origin_is_rejected_at_the_handshake(conversation, member, session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key, origin="https://evil.example") as (_, connected):
        assert not connected


# (Host header, Origin header, CSRF_TRUSTED_ORIGINS, accepted): the page's own host:port, as Django's
# CSRF origin check has it; 80 and 443 are no port; the scheme is not compared (TLS may end at a proxy).
ORIGINS = [
    ("localhost", "http://localhost", [], True),
    ("localhost:8000", "http://localhost:8000", [], True),
    ("localhost:8000", "http://localhost:9000", [], False),  # another app on the same host
    ("localhost", "http://localhost:8000", [], False),
    ("localhost:8000", "http://localhost", [], False),
    ("localhost", "https://localhost:443", [], True),
    ("localhost:80", "http://localhost", [], True),
    ("localhost", "https://localhost", [], True),
    ("[::1]:8000", "http://[::1]:8000", [], True),
    ("127.0.0.1:8000", "http://localhost:8000", [], False),  # both allowed hosts, but not the page's own
    ("evil.example", "http://evil.example", [], False),  # not in ALLOWED_HOSTS
    ("evil.example:8000", "http://evil.example:8000", [], False),
    ("localhost", "null", [], False),
    ("localhost", None, [], False),
    ("localhost", "http://user@localhost", [], False),
    ("localhost", "https://chat.example:8443", ["https://chat.example:8443"], True),
    ("localhost", "https://chat.example", ["https://chat.example:8443"], False),
    ("localhost", "http://chat.example:8443", ["https://chat.example:8443"], False),  # trusted: scheme too
    ("localhost", "https://chat.example", ["https://chat.example:443"], True),
    ("localhost", "https://a.example.internal", ["https://*.example.internal"], True),
    ("localhost", "https://a.example.internal:8443", ["https://*.example.internal"], False),
    ("localhost", "https://evil-example.internal", ["https://*.example.internal"], False),
]


@pytest.mark.parametrize(("host", "origin", "trusted", "accepted"), ORIGINS)
async def test_the_origin_must_be_the_pages_own_host_and_port_or_trusted(conversation, settings, host, origin,
                                                                         trusted, accepted):
    settings.CSRF_TRUSTED_ORIGINS = trusted
    async with chat_socket(conversation.pk, origin=origin, host=host) as (_, connected):
        assert connected is accepted


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("{not json", "invalid_json"),
        ("[1, 2]", "invalid_frame"),
        (json.dumps({"content": "hi"}), "invalid_frame"),
        (json.dumps({"type": "shout"}), "unknown_type"),
        (json.dumps({"type": "user_message"}), "invalid_frame"),
        (json.dumps({"type": "user_message", "content": 42}), "invalid_frame"),
        (json.dumps({"type": "user_message", "content": ""}), "empty_message"),
        (json.dumps({"type": "user_message", "content": " \n\t "}), "empty_message"),
        (json.dumps({"type": "user_message", "content": "x" * 8001}), "message_too_long"),
        (json.dumps({"type": "user_message", "content": "가" * 8001}, ensure_ascii=True), "message_too_long"),
        (json.dumps({"type": "user_message", "content": "hi", "profile": ["quick"]}), "invalid_frame"),
    ],
)
async def test_bad_frames_get_an_error_frame_and_nothing_is_saved(conversation, member, session_key, raw, code):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, connected):
        assert connected
        await send(communicator, raw)
        frame = await next_frame(communicator, timeout=10)
        assert frame["type"] == "error" and frame["code"] == code, frame
        assert frame["message"] and frame["message_id"] is None
        # The socket stays usable: a stop when nothing runs is a silent no-op.
        await send(communicator, {"type": "stop"})
        assert await communicator.receive_nothing(timeout=0.3)
    assert await db(_num_messages)() == 0


async def test_binary_frames_are_refused(conversation, member, session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await communicator.send_to(bytes_data=b'{"type": "stop"}')
        frame = await next_frame(communicator, timeout=10)
        assert frame["code"] == "invalid_frame"


async def test_message_limit_is_a_setting(conversation, member, session_key, settings):
    settings.PAGODA_CHAT_MAX_MESSAGE_CHARS = 10
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "user_message", "content": "eleven char"})
        frame = await next_frame(communicator, timeout=10)
        assert frame["code"] == "message_too_long" and "10" in frame["message"]
    assert await db(_num_messages)() == 0


async def test_unknown_profile_is_refused_before_anything_is_saved(conversation, member, session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "user_message", "content": "hi", "profile": "chat-gpt-9"})
        frame = await next_frame(communicator, timeout=10)
        assert frame["code"] == "unknown_profile"
    assert await db(_num_messages)() == 0


async def test_another_tenants_profile_is_unknown_here(conversation, member, other_tenant, session_key):
    from tenants.models import SamplingProfile

    await db(
        lambda: services.save_profile(SamplingProfile(tenant=other_tenant, name="globex-only")))()
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "user_message", "content": "hi", "profile": "globex-only"})
        assert (await next_frame(communicator, timeout=10))["code"] == "unknown_profile"


async def test_regenerate_with_nothing_to_answer(conversation, member, session_key):
    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "regenerate"})
        assert (await next_frame(communicator, timeout=10))["code"] == "nothing_to_regenerate"


async def test_engine_unavailable_gets_an_error_frame_and_nothing_is_saved(conversation, member, session_key):
    key = await db(session_key)(member)
    with runtime_set_aside():  # PAGODA_ENGINE is off here: engine_runtime raises EngineUnavailable
        async with chat_socket(conversation.pk, key) as (communicator, _):
            await send(communicator, {"type": "user_message", "content": "Is anyone there?"})
            frame = await next_frame(communicator, timeout=10)
    assert frame["type"] == "error" and frame["code"] == "engine_unavailable", frame
    assert "switched off" in frame["message"]
    assert await db(_num_messages)() == 0


async def test_an_idle_socket_outlives_the_redis_layers_blocking_pop(conversation, member, session_key, settings):
    """Regression: with channels-redis and redis-py 8 an idle consumer died after 5 s (pagoda.env)."""
    if "Redis" not in settings.CHANNEL_LAYERS["default"]["BACKEND"]:
        pytest.skip("only meaningful on the Redis channel layer (REDIS_URL)")
    import asyncio

    key = await db(session_key)(member)
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await asyncio.sleep(6.5)
        await send(communicator, "{broken")
        assert (await next_frame(communicator, timeout=10))["code"] == "invalid_json"


async def test_an_open_socket_holds_no_database_connection(conversation, member, session_key):
    """Regression: channels' own close missed the connection of each call (asgiref runs it in a copied
    context), so every open chat tab held a PostgreSQL connection until it closed."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("counts server-side sessions: PostgreSQL only")

    import psycopg

    params = connection.get_connection_params()
    dsn = {k: params[k] for k in ("host", "port", "user", "password") if params.get(k)}

    def num_connections() -> int:  # counted from outside Django, on the server
        with psycopg.connect(dbname="postgres", **dsn) as outside:
            row = outside.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [params["dbname"]])
            return row.fetchone()[0]

    key = await db(session_key)(member)
    before = num_connections()
    async with chat_socket(conversation.pk, key) as (communicator, _):
        await send(communicator, {"type": "regenerate"})  # a turn that reads the database, then refuses
        assert (await next_frame(communicator, timeout=10))["code"] == "nothing_to_regenerate"
        assert num_connections() == before
