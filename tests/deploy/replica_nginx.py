"""Debian's nginx in front of the replicas, for tests/deploy: the shipped deploy/nginx/pagoda.conf rendered
with this run's ports and paths, run as a non-daemon process in a temporary prefix."""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NGINX_CONF = ROOT / "deploy" / "nginx" / "pagoda.conf"


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)


def render_nginx(conf: str, *, listen_port: int, replica_ports: list[int], log_dir: Path) -> str:
    """deploy/nginx/pagoda.conf with this run's ports and paths. Fails if the shipped file changed shape."""
    server_line = re.compile(r"^ *server 127\.0\.0\.1:\d+ (max_fails=.*);$", re.M)
    options = server_line.findall(conf)
    assert options, "no `server 127.0.0.1:PORT ...;` lines in the upstream"
    servers = "\n".join(f"    server 127.0.0.1:{port} {options[0]};" for port in replica_ports)
    conf = server_line.sub("", conf, count=len(options) - 1)
    conf = server_line.sub(servers, conf, count=1)
    replacements = {"listen 80;": f"listen 127.0.0.1:{listen_port};",
                    "/var/log/nginx/": f"{log_dir}/", "/opt/pagoda/": f"{ROOT}/"}
    for old, new in replacements.items():
        assert old in conf, f"{old!r} is not in {NGINX_CONF}"
        conf = conf.replace(old, new)
    return conf


class Nginx:
    """Debian's nginx as a non-daemon process in a temporary prefix: the shipped config, rendered."""

    def __init__(self, prefix: Path, port: int, replica_ports: list[int]):
        self.prefix, self.port = prefix, port
        self.log_dir = prefix / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        (prefix / "pagoda.conf").write_text(render_nginx(NGINX_CONF.read_text(), listen_port=port,
                                                         replica_ports=replica_ports, log_dir=self.log_dir))
        temp_paths = "\n".join(f"    {name}_temp_path {prefix}/tmp_{name};"
                               for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        (prefix / "nginx.conf").write_text(f"""daemon off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {self.log_dir}/error.log warn;
events {{ worker_connections 256; }}
http {{
{temp_paths}
    include {prefix}/pagoda.conf;
}}
""")
        self.process: subprocess.Popen | None = None

    def command(self, *extra: str) -> list[str]:
        return [nginx_binary(), "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf"), *extra]

    def start(self) -> None:
        checked = subprocess.run(self.command("-t"), capture_output=True, text=True, timeout=30)
        if checked.returncode != 0:
            raise RuntimeError(f"nginx -t failed:\n{checked.stderr}")
        self.process = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"nginx is not listening on {self.port}") from None
                time.sleep(0.1)

    def access_log(self) -> list[str]:
        path = self.log_dir / "pagoda.access.log"
        return path.read_text().splitlines() if path.exists() else []

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful: lets open sockets finish
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
