"""Budgets on live servers (daphne, the real engine on the tiny model), on SQLite and on PostgreSQL:
a burst of concurrent chat turns from one employee, and of /v1 calls on one tenant's key, never spends
more than the budget plus one request's tokens; the refused get a `quota_exceeded` error frame or a 429
`insufficient_quota` saying when the budget resets; an employee past 80% gets a `budget_warning` frame.

PostgreSQL: PAGODA_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres, allowed to
create databases); its run is skipped if none answers."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "tests" / "reliability"))

import api_client  # noqa: E402
import reliability_server as rs  # noqa: E402
from ws_client import open_chat, run_turn  # noqa: E402

ADMIN_URL = os.environ.get("PAGODA_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
NUM_BURST = 12  # concurrent requests; the seeded employee has as many conversations
CHAT = [{"role": "user", "content": "Hello!"}]


@pytest.fixture(autouse=True)
def _no_engine_here(settings):
    settings.PAGODA_ENGINE = "off"


def _admin():
    import psycopg

    return psycopg.connect(ADMIN_URL.replace("postgres://", "postgresql://", 1), autocommit=True, connect_timeout=3)


def _database(backend: str, folder: Path):
    """(DATABASE_URL, cleanup) of a fresh database of `backend`."""
    if backend == "sqlite":
        return f"sqlite:///{folder / 'budget.sqlite3'}", lambda: None
    try:
        conn = _admin()
    except Exception as exc:  # noqa: BLE001 - no server to test against
        pytest.skip(f"no PostgreSQL at {ADMIN_URL}: {exc}")
    name = f"pagoda_budget_live_{os.getpid()}"
    with conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop():
        with _admin() as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return ADMIN_URL.rsplit("/", 1)[0] + f"/{name}", drop


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request, tmp_path_factory, tiny_llama_path):
    folder = tmp_path_factory.mktemp(f"budget-{request.param}")
    url, drop = _database(request.param, folder)
    try:
        with rs.running_server(folder, str(tiny_llama_path), engine_config={"num_kv_blocks": 512, "max_num_seqs": 64},
                               seed={"num_users": 2, "num_conversations": NUM_BURST, "max_tokens": 6,
                                     "long_tokens": 12}, database_url=url) as s:
            yield s
    finally:
        drop()


def manage(server, *args: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], env=server.env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def ledger_rows(server, where: str, params: tuple) -> list[dict]:
    return server.db.rows("SELECT num_prompt_tokens + num_output_tokens AS tokens, status FROM governance_usagerecord "
                          f"WHERE {where}", params)


def _user(server, index: int) -> dict:
    return [u for u in server.users if u["tenant"] == "acme"][index]


async def _burst_chat(server, user: dict) -> list:
    sockets = [await open_chat(server, cid, user["session"]).__aenter__() for cid in user["conversations"]]
    try:
        return await asyncio.gather(*(run_turn(ws, "Hello there!", timeout=120) for ws in sockets))
    finally:
        for ws in sockets:
            await ws.close()


def test_a_chat_burst_never_overspends_an_employees_budget_by_more_than_one_turn(server):
    user = _user(server, 0)
    budget = 150
    manage(server, "set_budget", "--tenant", "acme", "--period", "day", "--source", "chat", "--user",
           user["username"], "--tokens", str(budget))

    turns = asyncio.run(_burst_chat(server, user))

    ends = [t.end for t in turns]
    done = [e for e in ends if e["type"] == "done"]
    refused = [e for e in ends if e["type"] == "error" and e["code"] == "quota_exceeded"]
    assert len(done) + len(refused) == NUM_BURST, ends
    assert done and refused, ends
    assert all("resets at" in e["message"] and e["message_id"] is None for e in refused)
    rows = ledger_rows(server, "username = %s", (user["username"],))
    assert len(rows) == len(done)  # one ledger row per reply, none for the refused
    spent, largest = sum(r["tokens"] for r in rows), max(r["tokens"] for r in rows)
    assert budget <= spent <= budget + largest, (spent, largest)
    assert server.db.row("SELECT COUNT(*) AS n FROM governance_budgetreservation")["n"] == 0  # all released


def test_an_employee_past_80_percent_is_warned_then_refused(server):
    user = _user(server, 1)

    async def one_turn(conversation_id: int):
        async with open_chat(server, conversation_id, user["session"]) as ws:
            return await run_turn(ws, "Hello!", timeout=120)

    first = asyncio.run(one_turn(user["conversations"][0]))
    assert first.end["type"] == "done"
    (row,) = ledger_rows(server, "username = %s", (user["username"],))
    manage(server, "set_budget", "--tenant", "acme", "--period", "month", "--source", "chat", "--user",
           user["username"], "--tokens", str(int(row["tokens"] * 1.2)))  # one turn is 83% of it

    warned = asyncio.run(one_turn(user["conversations"][1]))
    kinds = [f["type"] for f in warned.frames]
    assert kinds[0] == "budget_warning" and warned.end["type"] == "done", warned.frames
    assert warned.frames[0]["used_tokens"] == row["tokens"] and "monthly chat budget" in warned.frames[0]["message"]

    refused = asyncio.run(one_turn(user["conversations"][2]))
    assert refused.end["code"] == "quota_exceeded" and [f["type"] for f in refused.frames] == ["error"]


def _api_burst(server, key_name: str) -> tuple[list[dict], list[dict]]:
    """NUM_BURST concurrent chat completions on one key: (the answered bodies, the refused ones); every
    call is one or the other, and the burst has some of each."""
    async def burst():
        async with api_client.client(NUM_BURST) as http:
            return await asyncio.gather(*(
                api_client.post(http, server, "chat/completions",
                                {"model": "quick", "messages": CHAT, "max_tokens": 6}, key_name)
                for _ in range(NUM_BURST)))

    answers = asyncio.run(burst())
    ok = [body for status, body, _, _ in answers if status == 200]
    refused = [body for status, body, _, _ in answers if status == 429]
    assert len(ok) + len(refused) == NUM_BURST, answers
    assert ok and refused
    return ok, refused


def test_an_api_burst_never_overspends_the_tenants_api_budget_by_more_than_one_call(server):
    budget = 200
    manage(server, "set_budget", "--tenant", "globex", "--period", "month", "--source", "api", "--tokens", str(budget))

    ok, refused = _api_burst(server, "globex")
    assert {b["error"]["code"] for b in refused} == {"insufficient_quota"}
    assert {b["error"]["type"] for b in refused} == {"insufficient_quota"}
    assert all("resets at" in b["error"]["message"] for b in refused)
    rows = ledger_rows(server, "tenant_slug = %s AND source = %s", ("globex", "api"))
    assert len(rows) == NUM_BURST  # every call has its ledger row, the refused with no tokens
    spent = sum(r["tokens"] for r in rows)
    largest = max(r["tokens"] for r in rows)
    assert spent == sum(b["usage"]["total_tokens"] for b in ok)
    assert budget <= spent <= budget + largest, (spent, largest)


def test_an_api_burst_on_an_employees_key_never_overspends_their_budget_by_more_than_one_call(server):
    user = _user(server, 1)
    plaintext = manage(server, "create_api_key", "acme", "personal", "--owner", user["username"]).strip()
    server.keys["acme-personal"] = {"plaintext": plaintext}
    budget = 200
    manage(server, "set_budget", "--tenant", "acme", "--period", "day", "--source", "api", "--user",
           user["username"], "--tokens", str(budget))

    ok, refused = _api_burst(server, "acme-personal")
    assert {b["error"]["code"] for b in refused} == {"insufficient_quota"}
    assert all("Your daily API budget" in b["error"]["message"] for b in refused)
    rows = ledger_rows(server, "username = %s AND source = %s", (user["username"], "api"))
    assert len(rows) == NUM_BURST  # the calls of the owned key are the owner's, the refused ones too
    spent, largest = sum(r["tokens"] for r in rows), max(r["tokens"] for r in rows)
    assert spent == sum(b["usage"]["total_tokens"] for b in ok)
    assert budget <= spent <= budget + largest, (spent, largest)
