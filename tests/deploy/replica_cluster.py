"""Real Pagoda replicas behind a real nginx on this machine, for tests/deploy and deploy/replicas_demo.sh.

    cluster = Cluster(model="/path/or/name", long_tokens=64)
    cluster.start()     # a scratch PostgreSQL database, seeded; replicas by deploy/replica.sh on free
                        # loopback ports, sharing it and Redis; nginx with deploy/nginx/pagoda.conf
    ...                 # cluster.url (nginx), cluster.replicas[i], cluster.login(...), cluster.stats(i)
    cluster.close()     # always: replicas and nginx stopped, the database dropped

Only loopback addresses are used, and every wait is bounded in time.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import httpx

from replica_nginx import NGINX_CONF, Nginx, nginx_binary, render_nginx  # noqa: F401 (re-exported)
from replica_ws import WsClient

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_url() -> str:
    return os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"


def postgres_admin_url() -> str:
    """The run's PostgreSQL server (DATABASE_URL when it is one), connected to its `postgres` database."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        url = "postgresql://postgres@127.0.0.1:5432/postgres"
    parsed = urlparse(url)
    return parsed._replace(scheme="postgresql", path="/postgres", query="").geturl()


def missing_services() -> list[str]:
    """What this machine lacks for a cluster: nginx, a reachable PostgreSQL, a reachable Redis."""
    missing = [] if nginx_binary() else ["nginx (bash deploy/install_system_packages.sh)"]
    try:
        import psycopg

        psycopg.connect(postgres_admin_url(), connect_timeout=3).close()
    except Exception as exc:
        missing.append(f"PostgreSQL ({exc.__class__.__name__})")
    try:
        import redis

        redis.Redis.from_url(redis_url(), socket_connect_timeout=2).ping()
    except Exception as exc:
        missing.append(f"Redis ({exc.__class__.__name__})")
    return missing


def wait_until(predicate, timeout: float, interval: float = 0.2, what: str = "condition"):
    """Poll predicate() until it returns a truthy value (returned); TimeoutError after `timeout` s."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # not up yet
            last_error = exc
        time.sleep(interval)
    raise TimeoutError(f"{what} not reached in {timeout} s (last error: {last_error!r})")


class ScratchDatabase:
    """A fresh database on the run's PostgreSQL server, dropped afterwards."""

    def __init__(self):
        self.admin_url = postgres_admin_url()
        self.name = f"pagoda_replicas_{os.getpid()}_{secrets.token_hex(3)}"
        self.url = urlparse(self.admin_url)._replace(scheme="postgres", path=f"/{self.name}").geturl()

    def _admin(self):
        import psycopg

        return psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5)

    def create(self) -> None:
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')

    def drop(self) -> None:
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def rows(self, sql: str, params: tuple = ()) -> list[dict]:
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self.url.replace("postgres://", "postgresql://", 1), row_factory=dict_row) as conn:
            return list(conn.execute(sql, params))


@dataclass
class Replica:
    index: int
    name: str
    port: int
    process: subprocess.Popen
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, num_chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-num_chars:]

    def kill(self) -> None:
        """SIGKILL: the process dies mid-request, as in a crash or a power cut."""
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        if self.alive:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


class Cluster:
    """num_replicas daphne replicas (each its own engine on the CPU) + nginx, on one scratch database."""

    def __init__(self, model: str, *, num_replicas: int = 2, long_tokens: int = 64,
                 engine_config: dict | None = None, ready_timeout: float = 300):
        self.model, self.num_replicas, self.long_tokens = model, num_replicas, long_tokens
        self.engine_config = engine_config or {"num_kv_blocks": 256}
        self.ready_timeout = ready_timeout
        self.workdir = Path(tempfile.mkdtemp(prefix="pagoda-replicas-"))
        self.workdir.chmod(0o755)  # nginx workers (user nobody when run as root) write temp files here
        self.db = ScratchDatabase()
        self.secret_key = secrets.token_urlsafe(40)  # one key for all replicas: sessions cross them
        self.replicas: list[Replica] = []
        self.nginx: Nginx | None = None
        self.seed: dict = {}
        self.root: httpx.Client | None = None
        self._db_created = False

    # -- life cycle -------------------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PAGODA_", "DJANGO_"))}
        env.update({
            "DATABASE_URL": self.db.url,
            "REDIS_URL": redis_url(),
            "PAGODA_MODEL": self.model,
            "PAGODA_DEVICE": "cpu",
            "CUDA_VISIBLE_DEVICES": "",
            "PAGODA_ENGINE": "on",
            "PAGODA_ENGINE_CONFIG": json.dumps(self.engine_config),
            "PAGODA_PIN_SYNC_SECONDS": "0",  # no periodic watcher: re-pins can only come from Redis
            "PAGODA_VAR_DIR": str(self.workdir / "var"),
            "PAGODA_PYTHON": PYTHON,
            "SECRET_KEY": self.secret_key,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DEBUG": "false",
            "OMP_NUM_THREADS": "1",  # two engines on two shared cores: one thread each
            "TOKENIZERS_PARALLELISM": "false",
        })
        return env

    def start(self) -> None:
        self.db.create()
        self._db_created = True
        env = self.env()
        done = subprocess.run([PYTHON, str(ROOT / "tests/deploy/replicas_seed.py"), str(self.long_tokens)],
                              env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"seeding failed:\n{done.stderr[-4000:]}")
        self.seed = json.loads(done.stdout.strip().splitlines()[-1])
        for index in range(self.num_replicas):
            self.replicas.append(self._start_replica(index, env))
        for replica in self.replicas:
            self._wait_healthy(replica)
        self.nginx = Nginx(self.workdir / "nginx", free_port(), [r.port for r in self.replicas])
        self.nginx.start()
        self.root = self.login("root")
        for replica in self.replicas:
            wait_until(lambda r=replica: self._ready(r), 60, 0.5, what=f"{replica.name} pinned and listening")

    def _start_replica(self, index: int, env: dict[str, str]) -> Replica:
        port = free_port()
        name = f"replica-{index}"
        log_path = self.workdir / f"{name}.log"
        process = subprocess.Popen(["bash", str(ROOT / "deploy/replica.sh"), str(index)],
                                   env={**env, "PORT": str(port), "PAGODA_REPLICA": name}, cwd=ROOT,
                                   stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)
        return Replica(index, name, port, process, log_path)

    def _wait_healthy(self, replica: Replica) -> None:
        def healthy() -> bool:
            if not replica.alive:
                raise RuntimeError(f"{replica.name} exited:\n{replica.log_tail()}")
            return httpx.get(f"{replica.url}/health", timeout=5).status_code == 200

        try:
            wait_until(healthy, self.ready_timeout, 0.5, what=f"{replica.name} healthy")
        except TimeoutError as exc:
            raise RuntimeError(f"{exc}\n{replica.log_tail()}") from None

    def _ready(self, replica: Replica) -> bool:
        stats = self.stats(replica.index)
        listener = stats.get("pin_listener") or {}
        return {"tenant:acme", "tenant:globex"} <= set(stats["pins"]) and listener.get("joined", False)

    def close(self) -> None:
        if self.root is not None:
            self.root.close()
        for replica in self.replicas:
            replica.stop()
        if self.nginx is not None:
            self.nginx.stop()
        if self._db_created:
            self.db.drop()

    def cleanup_files(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

    # -- HTTP -------------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.nginx.port}"

    def replica_named(self, name: str | None) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    def login(self, username: str, base_url: str | None = None) -> httpx.Client:
        """A client logged in as `username` (through nginx unless base_url), cookies kept."""
        client = httpx.Client(base_url=base_url or self.url, timeout=30)
        client.get("/accounts/login/").raise_for_status()
        response = client.post("/accounts/login/", data={
            "username": username, "password": self.seed["passwords"][username],
            "csrfmiddlewaretoken": client.cookies["csrftoken"]})
        assert response.status_code == 302, f"login of {username} failed: {response.status_code}"
        return client

    def stats(self, index: int) -> dict:
        """Replica `index`'s own engine numbers and pins, asked of it directly (not through nginx)."""
        response = self.root.get(f"{self.replicas[index].url}/console/engine/stats.json", timeout=10)
        response.raise_for_status()
        return response.json()

    def pin_blocks(self, index: int, slug: str) -> int | None:
        pin = self.stats(index)["pins"].get(f"tenant:{slug}")
        return pin["num_blocks"] if pin else None

    def api_headers(self, slug: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.seed['keys'][slug]}"}

    @staticmethod
    def post_form(client: httpx.Client, path: str, data: dict) -> httpx.Response:
        return client.post(path, data={**data, "csrfmiddlewaretoken": client.cookies["csrftoken"]})

    # -- chat -------------------------------------------------------------------------------------------
    def new_conversation(self, client: httpx.Client, tenant: str) -> int:
        response = self.post_form(client, "/chat/new/", {"tenant": tenant})
        assert response.status_code == 302, response.status_code
        return int(re.search(r"/chat/(\d+)/", response.headers["location"]).group(1))

    def socket(self, client: httpx.Client, conversation_id: int, base_url: str | None = None) -> WsClient:
        """The chat WebSocket of a conversation, as the page opens it (cookies and origin of base_url)."""
        base = base_url or self.url
        cookie = "; ".join(f"{c.name}={c.value}" for c in client.cookies.jar)
        return WsClient.connect(base.replace("http://", "ws://") + f"/ws/chat/{conversation_id}/",
                                cookie=cookie, origin=base)


def chat_turn(ws: WsClient, frame: dict, timeout: float = 120) -> list[dict]:
    """Send one client frame; the server frames up to and including done / error."""
    ws.send_json(frame)
    frames = []
    while not frames or frames[-1]["type"] not in ("done", "error"):
        frames.append(ws.recv_json(timeout))
    return frames


def stream_completion(url: str, headers: dict, body: dict, *, attempts: int = 3, on_first_chunk=None,
                      deadline_s: float = 120) -> dict:
    """POST a streamed chat completion, retrying (as a client should) when the stream breaks.

    Returns {"text", "attempts", "replicas" (the X-Pagoda-Replica of each attempt), "errors", "done"}.
    """
    result = {"text": "", "attempts": 0, "replicas": [], "errors": [], "done": False}
    deadline = time.monotonic() + deadline_s
    while result["attempts"] < attempts and time.monotonic() < deadline:
        result["attempts"] += 1
        text = ""
        try:
            with httpx.stream("POST", f"{url}/v1/chat/completions", headers=headers,
                              json={**body, "stream": True}, timeout=60) as response:
                result["replicas"].append(response.headers.get("x-pagoda-replica"))
                if response.status_code != 200:
                    result["errors"].append(f"HTTP {response.status_code}")
                    time.sleep(0.5)
                    continue
                for line in response.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    payload = line.removeprefix("data: ")
                    if payload == "[DONE]":
                        result.update(text=text, done=True)
                        return result
                    chunk = json.loads(payload)
                    if chunk.get("choices"):
                        text += chunk["choices"][0]["delta"].get("content") or ""
                        if on_first_chunk is not None:
                            on_first_chunk()
                            on_first_chunk = None
            result["errors"].append("stream ended without [DONE]")
        except httpx.HTTPError as exc:
            result["errors"].append(type(exc).__name__)
        time.sleep(0.5)
    return result
