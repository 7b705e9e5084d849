"""A real Pagoda server for the reliability tests and load runs, built on tests/api/api_live_server.py:
daphne on a free 127.0.0.1 port (optionally with injectable faults, faulty_daphne.py), the real engine
(a tiny random model, or the default SmolLM2), its own database, seeded by reliability_seed.py with
users, sessions, conversations and API keys.

    with running_server(folder, model, engine_config={...}, seed={...}) as server:
        server.url, server.key("acme"), server.users[0]["session"], server.engine_stats(), server.rss_mb()
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "tests" / "api"))

import api_live_server as live  # noqa: E402  (a sibling folder's module: the tests folders are not packages)

PYTHON = sys.executable
LOAD_TESTS = os.environ.get("PAGODA_LOAD_TESTS", "") == "1"  # the heavy runs (load.py, 1,000 disconnects)
HERE = Path(__file__).resolve().parent


@dataclass
class RelServer(live.LiveServer):
    process: subprocess.Popen | None = None
    users: list[dict] = field(default_factory=list)
    tenants: dict[str, int] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    role: str = ""  # the PostgreSQL role it logs in as, when a test made one (test_faults_database.py)

    @property
    def ws_base(self) -> str:
        return self.url.replace("http://", "ws://", 1)

    def rss_mb(self) -> float:
        """Resident memory of the server process (engine included: it runs in-process)."""
        import psutil

        return psutil.Process(self.process.pid).memory_info().rss / 2**20

    def health(self) -> tuple[int, dict]:
        response = httpx.get(f"{self.url}/health", timeout=10)
        return response.status_code, response.json()

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_idle(self, timeout: float = 120) -> dict:
        """Engine stats once nothing runs or waits (the engine has let go of every request)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                stats = self.engine_stats()["stats"]
            except httpx.TimeoutException:  # a loaded server saving the last replies can take over 10 s
                if time.monotonic() > deadline:
                    raise
                continue
            if stats["num_running"] == 0 and stats["num_waiting"] == 0:
                return stats
            if time.monotonic() > deadline:
                raise AssertionError(f"requests still held by the engine after {timeout} s: {stats}")
            time.sleep(0.2)


def leaked_blocks(stats: dict) -> int:
    """KV blocks still referenced by a request once the engine is idle (pinned prefixes excepted)."""
    return stats["num_blocks_used"] - stats["num_blocks_pinned"]


def _stats_headers(secret_key: str) -> dict[str, str]:
    from django.utils.crypto import salted_hmac

    from console import panels

    # panels.stats_token() with the server's key (the test process may run with another one)
    token = salted_hmac("pagoda.console.engine_stats", "v1", secret=secret_key).hexdigest()
    return {panels.STATS_TOKEN_HEADER: token}


# Starts a command with SIGINT ignored, as a script's background job (`run.sh &`) is started.
SIGINT_IGNORED = ["bash", "-c", 'trap "" INT; exec "$@"', "bash"]


def _start(env: dict[str, str], log_path: Path, faults: bool, daphne_args: list[str],
           web_processes: int = 1, sigint_ignored: bool = False) -> tuple[subprocess.Popen, str]:
    port = live.free_port()
    log = open(log_path, "wb")
    if web_processes > 1:  # pagoda.serve: several daphne processes sharing one engine core
        command = [PYTHON, "-m", "pagoda.serve", "--host", "127.0.0.1", "--port", str(port),
                   "--processes", str(web_processes), "--", *daphne_args]
    else:
        entry = [str(HERE / "faulty_daphne.py")] if faults else ["-m", "daphne"]
        command = [PYTHON, *entry, "-b", "127.0.0.1", "-p", str(port), *daphne_args, "pagoda.asgi:application"]
    if sigint_ignored:
        command = [*SIGINT_IGNORED, *command]
    process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    return process, f"http://127.0.0.1:{port}"


def launch(folder: Path, model: str, *, engine_config: dict, seed: dict, database_url: str | None = None,
           faults: bool = False, extra_env: dict | None = None, ready_timeout: float = 300,
           daphne_args: list[str] | None = None, web_processes: int = 1, sigint_ignored: bool = False) -> RelServer:
    """Seed a database, start the server and wait until its engine is ready and the prompts pinned.
    `sigint_ignored`: the server starts with SIGINT ignored (see SIGINT_IGNORED)."""
    import secrets

    folder.mkdir(parents=True, exist_ok=True)
    database_url = database_url or f"sqlite:///{folder / 'reliability.sqlite3'}"
    secret_key = secrets.token_urlsafe(50)
    env = live.server_env(database_url, model, folder, secret_key)
    env["PAGODA_ENGINE_CONFIG"] = json.dumps(engine_config)
    env["RELIABILITY_SEED"] = json.dumps(seed)
    env["LOG_LEVEL"] = "WARNING"  # the request log stays (its own logger); per-request INFO lines go
    env.update(extra_env or {})
    done = subprocess.run([PYTHON, str(HERE / "reliability_seed.py")], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"seeding the reliability database failed:\n{done.stderr[-4000:]}")
    seeded = json.loads(done.stdout.strip().splitlines()[-1])
    log_path = folder / "server.log"
    # Made before the process starts: if they fail, no server is left running.
    stats_headers, db = _stats_headers(secret_key), live.LiveDb(database_url)
    process, url = _start(env, log_path, faults, daphne_args or [], web_processes, sigint_ignored)
    server = RelServer(url=url, keys=seeded["keys"], prompts=seeded["prompts"], db=db, stats_headers=stats_headers,
                       log_path=log_path, process=process, users=seeded["users"], tenants=seeded["tenants"], env=env)
    try:
        live.wait_ready(server, process, [f"tenant:{slug}" for slug in seeded["prompts"]], timeout=ready_timeout)
    except BaseException:
        live.stop(process)
        raise
    return server


@contextlib.contextmanager
def running_server(folder: Path, model: str, **kwargs):
    server = launch(folder, model, **kwargs)
    try:
        yield server
    finally:
        live.stop(server.process)


def default_model_path() -> str:
    """The embedded SmolLM2-135M-Instruct, converted into the local cache on first use."""
    from inference.model_loader import resolve_model_path

    return str(resolve_model_path("smollm2-135m-instruct"))


def setup_django() -> None:
    """For the scripts run outside pytest: the stats token and the seed need Django's settings."""
    for path in (ROOT / "platform", ROOT):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pagoda.settings")
    os.environ.setdefault("PAGODA_ENGINE", "off")
    import django

    django.setup()
