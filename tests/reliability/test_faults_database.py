"""The database going away under a live server on PostgreSQL: the server runs as its own role, and the
test takes that role's access away (ALTER ROLE ... NOLOGIN, its sessions terminated), then gives it
back. Requests meanwhile get clean errors (503 JSON on /v1, a 503 page with Retry-After elsewhere, a
refused socket), nothing half-written is left behind, and the server serves again once it is back.
A chat reply whose save failed is reported as such, and shown (then stored) failed once stale; and a /v1 stream
holds no connection while it generates (the load run on PostgreSQL ran out of them).

These servers read an API call's key, profile and prompt on every call (PAGODA_API_CACHE_SECONDS=0), so
every call meets the outage. With the per-process cache on (the default), a call of a tenant without
API budgets whose key and profile are cached is still served for up to that many seconds into an
outage, its usage row lost (docs/API.md); a tenant with budgets reserves in the database first.

Uses the PostgreSQL at PAGODA_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres,
a role that may create roles and databases); skipped if none answers."""
import asyncio
import contextlib
import os
import time

import httpx
import pytest

import api_client
import reliability_server as rs
from ws_client import next_frame, open_chat, run_turn

ADMIN_URL = os.environ.get("PAGODA_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
CHAT = [{"role": "user", "content": "Hello!"}]
STALE_REPLY_S = 5  # the server's PAGODA_CHAT_STALE_REPLY_SECONDS: a reply pending longer was lost


def _admin():
    import psycopg

    return psycopg.connect(ADMIN_URL.replace("postgres://", "postgresql://", 1), autocommit=True, connect_timeout=3)


class Outage:
    """While inside: the server's role cannot log in and its open sessions are gone."""

    def __init__(self, role: str):
        self.role = role

    def __enter__(self):
        with _admin() as conn:
            conn.execute(f'ALTER ROLE "{self.role}" NOLOGIN')
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (self.role,))
        return self

    def __exit__(self, *exc):
        with _admin() as conn:
            conn.execute(f'ALTER ROLE "{self.role}" LOGIN')


@contextlib.contextmanager
def _server_with_own_role(folder, model_path, name: str, extra_env: dict):
    """A server logging in as a role (and into a database) of its own, dropped afterwards."""
    with _admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'DROP ROLE IF EXISTS "{name}"')
        conn.execute(f'CREATE ROLE "{name}" LOGIN')
        conn.execute(f'CREATE DATABASE "{name}" OWNER "{name}"')
    host = ADMIN_URL.split("@", 1)[1].split("/", 1)[0]
    try:
        with rs.running_server(folder, str(model_path), engine_config={"num_kv_blocks": 256},
                               seed={"num_users": 1, "num_conversations": 6, "max_tokens": 6, "long_tokens": 60},
                               database_url=f"postgres://{name}@{host}/{name}",
                               # a lost reply's lease (its release failed too) lapses as it goes stale
                               extra_env={"PAGODA_CHAT_STALE_REPLY_SECONDS": str(STALE_REPLY_S),
                                          "PAGODA_CHAT_REPLY_LOCK_SECONDS": str(STALE_REPLY_S),
                                          "PAGODA_API_CACHE_SECONDS": "0", **extra_env}) as server:
            server.role = name
            server.db = rs.live.LiveDb(ADMIN_URL.rsplit("/", 1)[0] + f"/{name}")  # reads as the admin
            yield server
    finally:
        with _admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{name}"')


def _require_postgres():
    try:
        _admin().close()
    except Exception as exc:  # noqa: BLE001 - no server to test against
        pytest.skip(f"no PostgreSQL at {ADMIN_URL}: {exc}")


@pytest.fixture(scope="module")
def pg_server(tmp_path_factory, tiny_llama_path):
    _require_postgres()
    with _server_with_own_role(tmp_path_factory.mktemp("pg-server"), tiny_llama_path,
                               f"pagoda_rel_outage_{os.getpid()}", {}) as server:
        yield server


POOL_SIZE = 3
POOL_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def pooled_server(tmp_path_factory, tiny_llama_path):
    _require_postgres()
    with _server_with_own_role(tmp_path_factory.mktemp("pg-pooled"), tiny_llama_path,
                               f"pagoda_rel_pooled_{os.getpid()}",
                               {"PAGODA_DB_POOL_SIZE": str(POOL_SIZE),
                                "PAGODA_DB_POOL_TIMEOUT_SECONDS": str(POOL_TIMEOUT_S)}) as server:
        yield server


async def _api_calls(server):
    async with api_client.client(4) as http:
        plain = await api_client.post(http, server, "chat/completions", {"model": "quick", "messages": CHAT}, "acme")
        streamed = await api_client.stream(http, server, "chat/completions", {"model": "quick", "messages": CHAT},
                                           "acme")
        models = await http.get(f"{server.url}/v1/models", headers=api_client.auth(server, "acme"), timeout=30)
        return plain, streamed, models


async def _chat(server, conversation_id: int, profile: str = "quick"):
    user = server.users[0]
    try:
        async with open_chat(server, conversation_id, user["session"]) as ws:
            return await run_turn(ws, "Hello", profile=profile, timeout=60)
    except Exception as exc:  # noqa: BLE001 - a refused socket is a clean answer here
        return exc


def _integrity(server) -> dict:
    db = server.db
    return {
        "usage_without_status": db.row("SELECT COUNT(*) AS n FROM tenants_apiusage WHERE status_code IS NULL")["n"],
        "user_messages": db.row("SELECT COUNT(*) AS n FROM tenants_message WHERE role = 'user'")["n"],
        "replies": db.row("SELECT COUNT(*) AS n FROM tenants_message WHERE role = 'assistant'")["n"],
        "pending": db.row("SELECT COUNT(*) AS n FROM tenants_message WHERE status = 'pending'")["n"],
    }


def test_while_the_database_is_gone_requests_get_clean_errors(pg_server):
    user = pg_server.users[0]
    plain, streamed, models = asyncio.run(_api_calls(pg_server))
    assert (plain[0], streamed.status, models.status_code) == (200, 200, 200)
    before = _integrity(pg_server)

    with Outage(pg_server.role):
        plain, streamed, models = asyncio.run(_api_calls(pg_server))
        for status, body, headers in [(plain[0], plain[1], plain[2]), (streamed.status, streamed.error, {}),
                                      (models.status_code, models.json(), models.headers)]:
            assert status == 503 and body["error"]["code"] == "database_unavailable", body
        assert int(plain[2]["retry-after"]) >= 1
        page = httpx.get(f"{pg_server.url}/chat/", cookies={"sessionid": user["session"]}, timeout=30)
        # pagoda.unavailable: a page the database cannot serve is a 503 to retry, not a 500
        assert page.status_code == 503 and int(page.headers["retry-after"]) >= 1 and "Traceback" not in page.text
        socket = asyncio.run(_chat(pg_server, user["conversations"][0]))
        assert isinstance(socket, Exception) or socket.end["type"] == "error", socket  # refused, never hung
        assert pg_server.health()[0] == 200 and pg_server.alive()  # the engine does not need the database

    assert _integrity(pg_server) == before  # nothing was written, nothing half-written
    plain, streamed, models = asyncio.run(_api_calls(pg_server))
    assert (plain[0], streamed.status, models.status_code) == (200, 200, 200)
    turn = asyncio.run(_chat(pg_server, user["conversations"][1]))
    assert turn.end["type"] == "done" and turn.end["status"] == "complete"


async def _streams_across_an_outage(server):
    """Streams and a chat reply start, the database goes away and comes back while they run."""
    user = server.users[0]
    body = {"model": "long", "messages": [{"role": "user", "content": "A long story, please."}]}
    async with api_client.client(8) as http:
        streams = [asyncio.create_task(api_client.stream(http, server, "chat/completions", body, "acme"))
                   for _ in range(4)]
        chat = asyncio.create_task(_chat(server, user["conversations"][2], profile="long"))
        await asyncio.sleep(0.5)
        with Outage(server.role):
            await asyncio.sleep(1.0)
            results = await asyncio.gather(*streams)
            try:
                turn = await asyncio.wait_for(chat, 60)
            except TimeoutError:
                turn = None
        return results, turn


def test_an_outage_mid_answer_leaves_no_half_written_rows(pg_server):
    results, _ = asyncio.run(_streams_across_an_outage(pg_server))
    for s in results:  # the engine needs no database: the answers themselves complete
        assert s.status == 200 and s.events[-1] == "[DONE]"
    time.sleep(1)
    rows = pg_server.db.rows("SELECT status_code, num_output_tokens, finish_reason FROM tenants_apiusage "
                             "WHERE request_id = ANY(%s)", ([s.id for s in results],))
    # A usage row is written whole or not at all (the ones due during the outage are lost and logged).
    assert all(r["status_code"] == 200 and r["num_output_tokens"] == 60 and r["finish_reason"] == "length"
               for r in rows), rows
    assert _integrity(pg_server)["usage_without_status"] == 0


async def _connections_during_streams(server, num_streams: int) -> tuple[list, int]:
    """num_streams long API streams at once; the most database sessions the server's role held while
    all of them were generating (after their key and profile lookups, before their usage rows)."""
    body = {"model": "long", "max_tokens": 400, "messages": [{"role": "user", "content": "A long story."}]}
    count = "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE usename = %s"
    most, num_samples = 0, 0
    async with api_client.client(num_streams) as http:
        streams = [asyncio.create_task(api_client.stream(http, server, "chat/completions", body, "acme"))
                   for _ in range(num_streams)]
        while not all(s.done() for s in streams):
            if (await asyncio.to_thread(server.engine_stats))["stats"]["num_running"] == num_streams:
                most = max(most, (await asyncio.to_thread(server.db.row, count, (server.role,)))["n"])
                num_samples += 1
            await asyncio.sleep(0.05)
        assert num_samples >= 3, "the streams were too short to sample"
        return [s.result() for s in streams], most


def test_a_streaming_call_holds_no_database_connection(pg_server):
    """Found by the load run on PostgreSQL: each /v1 stream kept the connection of its key lookup until
    it ended, so 100 streams at once hit max_connections ("too many clients already")."""
    results, most = asyncio.run(_connections_during_streams(pg_server, 12))
    assert all(s.status == 200 and s.events[-1] == "[DONE]" for s in results)
    assert most <= 1, f"{most} database sessions held by 12 streams"


async def _chat_reply_across_an_outage(server) -> tuple[list[dict], int]:
    """A chat reply streams; the database goes away before it ends and stays away until its end frame
    came (or 30 s passed)."""
    user = server.users[0]
    async with open_chat(server, user["conversations"][3], user["session"]) as ws:
        turn = await run_turn(ws, "A long story, please.", profile="long", stop_after_first_delta=True)
        with Outage(server.role):
            try:
                while turn.end is None:
                    turn.frames.append(await next_frame(ws, 30))
            except TimeoutError:
                pass
    return turn.frames, turn.frames[0]["message_id"]


def test_a_chat_reply_whose_save_failed_is_reported_and_not_left_pending(pg_server):
    frames, reply_id = asyncio.run(_chat_reply_across_an_outage(pg_server))
    end = frames[-1]
    print(f"\nreply across an outage ended with {end}")
    # Never "done": the save and its retry both failed, and the page marks the reply failed.
    assert end["type"] == "error" and end["code"] == "reply_not_saved" and end["message_id"] == reply_id, end
    assert pg_server.db.row("SELECT status FROM tenants_message WHERE id = %s", (reply_id,))["status"] == "pending"
    # Once stale, the page shows it failed (nothing is left that could still save it); the
    # conversation's next turn stores that.
    time.sleep(STALE_REPLY_S + 0.5)
    user = pg_server.users[0]
    page = httpx.get(f"{pg_server.url}/chat/{user['conversations'][3]}/", cookies={"sessionid": user["session"]},
                     timeout=30)
    assert page.status_code == 200 and "This reply was lost before it could be saved" in page.text
    turn = asyncio.run(_chat(pg_server, user["conversations"][3]))
    assert turn.end["type"] == "done", turn.end
    row = pg_server.db.row("SELECT status, error FROM tenants_message WHERE id = %s", (reply_id,))
    assert row["status"] == "error" and row["error"] in page.text, row


def _sessions_opened(server) -> int:
    """Sessions the server's role has opened in its database so far. Its open ones are ended first: a
    session's count reaches the statistics for sure only once it exits (the pool replaces them)."""
    with _admin() as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (server.role,))
        for _ in range(50):
            if not conn.execute("SELECT 1 FROM pg_stat_activity WHERE usename = %s", (server.role,)).fetchone():
                break
            time.sleep(0.05)
        time.sleep(0.6)  # past PostgreSQL's minimum interval between statistics flushes
        conn.execute("SELECT pg_stat_clear_snapshot()")
        return conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", (server.role,)).fetchone()[0]


async def _calls(server, num: int):
    async with api_client.client(2) as http:
        return [await api_client.post(http, server, "chat/completions", {"model": "quick", "messages": CHAT}, "acme")
                for _ in range(num)]


@pytest.mark.parametrize("pooled", [False, True], ids=["one-connection-per-call", "pooled"])
def test_a_pooled_server_reuses_its_connections(pg_server, pooled_server, pooled):
    """PAGODA_DB_POOL_SIZE: 20 API calls (each looks up its key and profile, and writes a usage row) and
    a chat turn open at most the pool's size in sessions; without a pool, each call opens its own."""
    server = pooled_server if pooled else pg_server
    asyncio.run(_calls(server, 1))
    before = _sessions_opened(server)
    answers = asyncio.run(_calls(server, 20))
    turn = asyncio.run(_chat(server, server.users[0]["conversations"][4]))
    opened = _sessions_opened(server) - before
    print(f"\n{'pooled' if pooled else 'unpooled'}: {opened} sessions for 20 API calls and a chat turn")
    assert [a[0] for a in answers] == [200] * 20 and turn.end["type"] == "done"
    if pooled:
        assert 1 <= opened <= POOL_SIZE, f"{opened} sessions for 20 calls and a chat turn"
    else:
        assert opened >= 20, f"only {opened} sessions for 20 calls: is the count right?"


def test_a_pooled_server_fails_cleanly_in_an_outage_and_recovers(pooled_server):
    """Its pooled sessions die in the outage: calls get the same 503 (after the pool's timeout, not
    hung), and once the role may log in again the pool makes new ones."""
    asyncio.run(_calls(pooled_server, 2))
    with Outage(pooled_server.role):
        status, body, _, waited = asyncio.run(_calls(pooled_server, 1))[0]
        print(f"\npooled, in an outage: {status} after {waited:.2f} s")
        assert status == 503 and body["error"]["code"] == "database_unavailable", body
        assert waited < POOL_TIMEOUT_S + 10, f"the call took {waited:.1f} s"
    deadline = time.monotonic() + 30
    while True:  # the pool retries its connections with a backoff: back within seconds, not at once
        status = asyncio.run(_calls(pooled_server, 1))[0][0]
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    print(f"pooled: serving again {time.monotonic() - deadline + 30:.1f} s after the outage")
    assert status == 200
    turn = asyncio.run(_chat(pooled_server, pooled_server.users[0]["conversations"][5]))
    assert turn.end["type"] == "done" and turn.end["status"] == "complete"
