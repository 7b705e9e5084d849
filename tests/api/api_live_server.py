"""A real Pagoda server for the API tests: daphne on a free 127.0.0.1 port, the real engine on a tiny
random model, its own database (a SQLite file, or a fresh PostgreSQL database when the test run
itself uses PostgreSQL), seeded by api_live_seed.py.

The tests talk to it over HTTP only (the `openai` package, httpx) and read its database directly
(LiveDb) to check what it stored.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveDb:
    """Read-only SQL against the server's database; queries use %s placeholders on both backends."""

    def __init__(self, url: str):
        self.url = url

    def rows(self, sql: str, params: tuple = ()) -> list[dict]:
        if self.url.startswith("sqlite:"):
            with sqlite3.connect(self.url.removeprefix("sqlite:///")) as conn:
                conn.row_factory = sqlite3.Row
                return [dict(row) for row in conn.execute(sql.replace("%s", "?"), params)]
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self.url.replace("postgres://", "postgresql://", 1), row_factory=dict_row) as conn:
            return list(conn.execute(sql, params))

    def row(self, sql: str, params: tuple = ()) -> dict | None:
        rows = self.rows(sql, params)
        return rows[0] if rows else None


@dataclass
class PostgresScratch:
    """A fresh database on the test run's PostgreSQL server, dropped afterwards."""

    db_settings: dict
    name: str = field(default_factory=lambda: f"pagoda_api_live_{os.getpid()}")

    def _admin(self):
        import psycopg

        s = self.db_settings
        return psycopg.connect(host=s["HOST"] or None, port=s["PORT"] or None, user=s["USER"] or None,
                               password=s["PASSWORD"] or None, dbname="postgres", autocommit=True)

    def create(self) -> str:
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}"')
            conn.execute(f'CREATE DATABASE "{self.name}"')
        s = self.db_settings
        auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
        return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{self.name}"

    def drop(self) -> None:
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


@dataclass
class LiveServer:
    url: str
    keys: dict[str, dict]
    prompts: dict[str, str]
    db: LiveDb
    stats_headers: dict[str, str]
    log_path: Path

    def key(self, name: str) -> str:
        return self.keys[name]["plaintext"]

    def engine_stats(self) -> dict:
        """The whole engine's numbers, from the superuser-only stats endpoint (also used by engine_stats)."""
        response = httpx.get(f"{self.url}/console/engine/stats.json", headers=self.stats_headers, timeout=10)
        response.raise_for_status()
        return response.json()

    def log_tail(self, num_chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-num_chars:]


def server_env(database_url: str, model_path: str, var_dir: Path, secret_key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAGODA_", "DJANGO_"))}
    env.update({
        "DATABASE_URL": database_url,
        "PAGODA_MODEL": model_path,
        "PAGODA_DEVICE": "cpu",
        "PAGODA_ENGINE": "on",
        "PAGODA_ENGINE_CONFIG": json.dumps({"num_kv_blocks": 512}),
        "PAGODA_PIN_SYNC_SECONDS": "0",
        "PAGODA_VAR_DIR": str(var_dir),
        "SECRET_KEY": secret_key,  # the test process derives the stats token from the same key
        "DEBUG": "false",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT)]),
        "DJANGO_SETTINGS_MODULE": "pagoda.settings",
        "TOKENIZERS_PARALLELISM": "false",
    })
    return env  # REDIS_URL passes through: set, the server's rate limits count in Redis


def seed(env: dict[str, str]) -> dict:
    done = subprocess.run([PYTHON, str(ROOT / "tests/api/api_live_seed.py")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"seeding the live database failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def start(env: dict[str, str], log_path: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = open(log_path, "wb")
    process = subprocess.Popen(
        [PYTHON, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "pagoda.asgi:application"],
        env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
    )
    return process, f"http://127.0.0.1:{port}"


def wait_ready(server: LiveServer, process: subprocess.Popen, pin_keys: list[str], timeout: float = 180) -> None:
    """Until the engine is loaded and the tenants' prompts are pinned."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the live server exited ({process.returncode}):\n{server.log_tail()}")
        try:
            last = server.engine_stats()
            if last["engine"]["state"] == "ready" and all(k in last["pins"] for k in pin_keys):
                return
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.5)
    raise RuntimeError(f"the live server was not ready in {timeout} s (last: {last}):\n{server.log_tail()}")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@contextmanager
def serve(folder: Path, model_path: str, db_settings: dict, secret_key: str,
          stats_headers: dict[str, str]) -> Iterator[LiveServer]:
    """A seeded server on `model_path` until the block ends: its database is a SQLite file in `folder`, or
    a scratch database when the tests run on PostgreSQL (`db_settings`)."""
    scratch = None
    if db_settings["ENGINE"].endswith("postgresql"):
        scratch = PostgresScratch(db_settings, name=f"pagoda_api_live_{os.getpid()}_{folder.name}")
        database_url = scratch.create()
    else:
        database_url = f"sqlite:///{folder / 'live.sqlite3'}"
    env = server_env(database_url, model_path, folder, secret_key)
    seeded = seed(env)
    process, url = start(env, folder / "server.log")
    server = LiveServer(url=url, keys=seeded["keys"], prompts=seeded["prompts"], db=LiveDb(database_url),
                        stats_headers=stats_headers, log_path=folder / "server.log")
    try:
        wait_ready(server, process, ["tenant:acme", "tenant:globex"])
        yield server
    finally:
        stop(process)
        if scratch is not None:
            scratch.drop()
