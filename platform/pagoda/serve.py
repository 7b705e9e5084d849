"""One server of several web processes sharing one engine core:

    python -m pagoda.serve --host 127.0.0.1 --port 8000 --processes 4 [-- extra daphne arguments]

(deploy/run.sh runs this when PAGODA_WEB_PROCESSES > 1.) One web process keeps a GPU busy up to a
few dozen streams; past that its Python work (HTTP, SSE, the database) becomes the limit, as vLLM found
with its API server. This launcher binds the port once and hands the listening socket to N daphne
processes (`daphne --fd`), so the kernel spreads connections across them. The first process starts
the engine core (its child), which also listens on a private Unix socket; the others use that core
(PAGODA_ENGINE_CONNECT). SIGTERM / SIGINT are passed on to every process; when one exits, the others
are stopped and the launcher exits with its code, for the supervisor (systemd) to restart the whole.

Across processes, the chat's live features (closing an offboarded user's sockets, pin changes) travel
through the channel layer: set REDIS_URL.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

_STOP_TIMEOUT_S = 30.0


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(prog="python -m pagoda.serve", description=__doc__.split("\n\n")[1])
    ap.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    ap.add_argument("--processes", type=int, default=int(os.environ.get("PAGODA_WEB_PROCESSES", "1")))
    args = ap.parse_args(argv)
    if args.processes < 1:
        ap.error("--processes must be at least 1")
    return args, extra


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host.strip("[]"), port), family=family, backlog=1024)
    sock.set_inheritable(True)
    return sock


def main(argv: list[str] | None = None) -> int:
    args, daphne_args = parse_args(argv)
    if args.processes > 1 and not os.environ.get("REDIS_URL"):
        print("pagoda.serve: warning: without REDIS_URL each web process has its own channel layer; an "
              "offboarded user's open chat sockets in other processes are closed at their next turn only",
              file=sys.stderr)
    try:
        sock = _listen(args.host, args.port)
    except OSError as e:
        print(f"pagoda.serve: cannot listen on {args.host}:{args.port}: {e.strerror or e}", file=sys.stderr)
        return 2
    private = tempfile.mkdtemp(prefix="pagoda-core-")  # 0700: only this user reaches the core's socket
    core_path = os.path.join(private, "engine.sock")
    processes: list[subprocess.Popen] = []
    for i in range(args.processes):
        env = dict(os.environ)
        env.pop("PAGODA_ENGINE_LISTEN", None)
        env.pop("PAGODA_ENGINE_CONNECT", None)
        if args.processes > 1:
            env["PAGODA_ENGINE_LISTEN" if i == 0 else "PAGODA_ENGINE_CONNECT"] = core_path
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "daphne", "--fd", str(sock.fileno()), *daphne_args, "pagoda.asgi:application"],
            pass_fds=(sock.fileno(),), env=env))
    sock.close()  # the children hold it
    print(f"pagoda.serve: {args.processes} web process(es) on http://{args.host}:{args.port}/ "
          f"(pids {', '.join(str(p.pid) for p in processes)})", file=sys.stderr, flush=True)

    stopping = {"signal": None}

    def forward(signum, _frame) -> None:
        stopping["signal"] = signum
        for p in processes:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = 0
    try:
        while all(p.poll() is None for p in processes):
            time.sleep(0.2)
        ended = next(p for p in processes if p.poll() is not None)
        code = ended.returncode
        if stopping["signal"] is None:
            print(f"pagoda.serve: web process {ended.pid} exited ({code}); stopping the others", file=sys.stderr)
            forward(signal.SIGTERM, None)
        _wait_all(processes)
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
        try:
            os.unlink(core_path)
        except FileNotFoundError:
            pass
        os.rmdir(private)
    return 0 if stopping["signal"] is not None else (code or 1)


def _wait_all(processes: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    for p in processes:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


if __name__ == "__main__":
    sys.exit(main())
