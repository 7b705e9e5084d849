"""A company's first morning: 256 employees of two tenants log in through the real login form at the
same moment, each opens a new conversation and sends one message over the WebSocket; the embedded
SmolLM2 answers on the CPU (2 tokens each). Every login succeeds, every turn is answered and saved
(reply text and token count as sent, the user message, last_login), and no request gets a 5xx.

On the default SQLite, and on PostgreSQL with and without a connection pool (a fresh database on
PAGODA_TEST_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/postgres; skipped if none answers).
Before the SQLite options and the request queue (pagoda.db_queue) a 256-login burst got a 500
("database is locked" in update_last_login). Figures of the same burst in docs/RELIABILITY.md.
"""
import asyncio
import contextlib
import json
import os
import time

import pytest

import burst
import reliability_server as rs

ADMIN_URL = os.environ.get("PAGODA_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
NUM_EMPLOYEES = 256
MAX_TOKENS = 2
DATABASES = {
    "sqlite": {},
    "postgres": {},
    "postgres-pooled": {"PAGODA_DB_POOL_SIZE": "8"},
}


@contextlib.contextmanager
def _database(kind: str):
    """The server's DATABASE_URL: None (a fresh SQLite file) or a fresh PostgreSQL database, dropped after."""
    if kind == "sqlite":
        yield None
        return
    try:
        import psycopg

        admin = psycopg.connect(ADMIN_URL.replace("postgres://", "postgresql://", 1), autocommit=True,
                                connect_timeout=3)
    except Exception as exc:  # noqa: BLE001 - no server to test against
        pytest.skip(f"no PostgreSQL at {ADMIN_URL}: {exc}")
    name = f"pagoda_rel_burst_{os.getpid()}"
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("kind", list(DATABASES))
def test_256_logins_at_once_each_chat_answered_and_saved(kind, tmp_path):
    with _database(kind) as database_url, rs.running_server(
            tmp_path / "server", rs.default_model_path(), engine_config={}, database_url=database_url,
            seed={"num_users": NUM_EMPLOYEES // 2, "num_conversations": 0, "max_tokens": MAX_TOKENS},
            daphne_args=["--websocket_connect_timeout", "30"],  # as deploy/run.sh starts it
            extra_env=DATABASES[kind]) as server:
        started = time.monotonic()
        results = asyncio.run(burst.run_burst(server, server.users, password="pw", timeout=900))
        report = burst.figures(results, time.monotonic() - started)
        failures = burst.verify(server, results, MAX_TOKENS)
        print(f"\n{kind}: {json.dumps(report)}\nfailures: {failures}")
        assert len(results) == NUM_EMPLOYEES
        assert not any(failures.values()), (failures, report["errors"])
        stats = server.wait_idle(300)
        assert rs.leaked_blocks(stats) == 0 and server.alive()
