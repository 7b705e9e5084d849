"""A Pagoda server started as deploy/run.sh starts it: its database migrated and bootstrapped
(seed.py, the project's manage.py commands), then `daphne -b HOST -p PORT --websocket_connect_timeout
30 pagoda.asgi:application` with PAGODA_MODEL / PAGODA_DEVICE / PAGODA_ENGINE_CONFIG; ready once
/health says ok and the probe tenant's system prompt is pinned. Stopped with SIGINT (then SIGKILL)."""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATS_TOKEN_HEADER = "X-Pagoda-Stats-Token"  # console.panels: the engine stats endpoint's header


@dataclass
class Server:
    url: str
    api_key: str  # tenant "bench": no system prompt
    pinned_api_key: str  # tenant "pinned": the probe's system prompt, pinned
    username: str
    password: str
    profile: str
    process: subprocess.Popen
    log_path: Path
    secret_key: str
    conversations: list[int]  # the chat user's, untouched: one per socket request

    def stats(self) -> dict:
        """The whole engine's numbers and pins (/console/engine/stats.json, token from SECRET_KEY)."""
        import httpx
        from django.utils.crypto import salted_hmac

        token = salted_hmac("pagoda.console.engine_stats", "v1", secret=self.secret_key).hexdigest()
        response = httpx.get(f"{self.url}/console/engine/stats.json", headers={STATS_TOKEN_HEADER: token},
                             timeout=10)
        response.raise_for_status()
        return response.json()

    def log_tail(self, num_chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-num_chars:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(folder: Path, model: str, device: str, engine_config: dict, secret_key: str,
               database_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAGODA_", "DJANGO_"))}
    env.update({
        "DATABASE_URL": database_url or f"sqlite:///{folder / 'pagoda.sqlite3'}",
        "PAGODA_MODEL": model, "PAGODA_DEVICE": device, "PAGODA_ENGINE": "on",
        "PAGODA_ENGINE_CONFIG": json.dumps(engine_config),
        "PAGODA_VAR_DIR": str(folder), "SECRET_KEY": secret_key, "DEBUG": "false",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep),
        "DJANGO_SETTINGS_MODULE": "pagoda.settings", "TOKENIZERS_PARALLELISM": "false",
        "LOG_LEVEL": "WARNING",  # no INFO line per request on the server's path
    })
    return env


def seed_database(folder: Path, env: dict[str, str], *, output_len: int, system_prompt: str, password: str,
                  num_conversations: int = 0) -> dict:
    """Migrate and fill the database `env` names (seed.py, in a process of its own); its JSON line."""
    prompt_file = folder / "system_prompt.txt"
    prompt_file.write_text(system_prompt, encoding="utf-8")
    env_seed = {**env, "SERVEBENCH_SEED": json.dumps({"output_len": output_len, "password": password,
                                                      "system_prompt_file": str(prompt_file),
                                                      "num_conversations": num_conversations})}
    done = subprocess.run([sys.executable, "-m", "benchmarks.serve.seed"], env=env_seed, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"seeding the server's database failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def start_server(folder: Path, model: str, device: str, *, engine_config: dict, output_len: int,
                 system_prompt: str, num_conversations: int = 0, database_url: str | None = None,
                 ready_timeout: float = 1800, web_processes: int = 1) -> Server:
    """Seed a fresh database in `folder`, start daphne on a free port, wait until it is ready."""
    folder.mkdir(parents=True, exist_ok=True)
    secret_key, password = secrets.token_urlsafe(50), secrets.token_urlsafe(16)
    env = server_env(folder, model, device, engine_config, secret_key, database_url)
    seeded = seed_database(folder, env, output_len=output_len, system_prompt=system_prompt, password=password,
                           num_conversations=num_conversations)
    port = free_port()
    log_path = folder / "server.log"
    with open(log_path, "wb") as log:
        if web_processes > 1:  # as deploy/run.sh with PAGODA_WEB_PROCESSES: one engine core, N web processes
            command = [sys.executable, "-m", "pagoda.serve", "--host", "127.0.0.1", "--port", str(port),
                       "--processes", str(web_processes), "--", "--websocket_connect_timeout", "30"]
        else:
            command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                       "--websocket_connect_timeout", "30", "pagoda.asgi:application"]
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", seeded["api_key"], seeded["pinned_api_key"], seeded["username"],
                    password, seeded["profile"], process, log_path, secret_key, seeded["conversations"])
    try:
        wait_ready(server, "tenant:pinned", ready_timeout, streak=1 if web_processes == 1 else 10 * web_processes)
    except BaseException:
        server.stop()
        raise
    return server


def wait_ready(server: Server, pin_key: str, timeout: float, streak: int = 1) -> None:
    """Until `streak` answers say the engine is ready with the pin (with several web processes,
    each connection may reach another of them)."""
    import httpx

    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"the server exited ({server.process.returncode}):\n{server.log_tail()}")
        try:
            last = server.stats()
            if last["engine"]["state"] == "ready" and pin_key in last["pins"]:
                streak -= 1
                if streak <= 0:
                    return
                continue
        except (httpx.HTTPError, ValueError) as exc:
            last = exc
        time.sleep(0.5)
    raise RuntimeError(f"the server was not ready in {timeout} s (last: {last}):\n{server.log_tail()}")
