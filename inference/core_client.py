"""CoreClient: a frontend's end of an EngineCore (engine_core.py).

`CoreClient(config)` starts the core as a child process and waits until its model is loaded (with
`listen_path`, the core also takes other frontends there); `CoreClient(connect=path)` is such another
frontend, of a core another process started; `CoreClient(engine=...)` runs the core over an engine
built here, in a thread (tests that reach into the engine's internals use this). Commands go out from any thread. One reader thread takes the
core's messages: a step's deltas are grouped by the event loop that asked for each request, and each
loop is woken once per step (one `call_soon_threadsafe`), not once per token.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import os
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from .config import EngineConfig
from .errors import EngineDeadError
from .outputs import StreamDelta
from .wire import delta_from_tuple, error_from_tuple

log = logging.getLogger("inference")

_ROOT = Path(__file__).resolve().parent.parent  # the folder holding the inference package
Sink = tuple[asyncio.AbstractEventLoop, asyncio.Queue]


class CoreClient:
    # How the core's process is started; it is given the socket's fd and this process's pid.
    core_command: list[str] = [sys.executable, "-m", "inference.engine_core"]

    def __init__(self, config: EngineConfig | None = None, engine: Any = None, progress: bool = True,
                 owns_engine: bool = False, listen_path: str | None = None, connect: str | None = None):
        self.error: str | None = None
        self.process: subprocess.Popen | None = None
        self._core_thread: threading.Thread | None = None
        self._stopping = False
        self._send_lock = threading.Lock()
        self._sinks_lock = threading.Lock()
        self._sinks: dict[str, Sink] = {}
        self._closed = False  # set (under _sinks_lock) once every request has been failed
        self._calls: dict[int, concurrent.futures.Future] = {}
        self._call_ids = itertools.count()
        if connect is not None:
            self.conn, self.info = self._connect(connect)
        else:
            ours, theirs = socket.socketpair()
            self.conn = Connection(ours.detach())
            if engine is None:
                self.info = self._start_process(theirs, config or EngineConfig(), progress, listen_path)
            else:
                self.info = self._start_thread(theirs, engine, owns_engine)
        self._reader = threading.Thread(target=self._read, name="pagoda-engine-reader", daemon=True)
        self._reader.start()

    # -- starting ----------------------------------------------------------------------------------------
    @staticmethod
    def _connect(path: str) -> tuple[Connection, dict]:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError as e:
            sock.close()
            raise EngineDeadError(f"no engine core answers at {path}: {e.strerror or e}") from None
        conn = Connection(sock.detach())
        try:
            kind, info = conn.recv()
        except (EOFError, OSError):
            conn.close()
            raise EngineDeadError(f"the engine core at {path} closed the connection") from None
        return conn, info

    def _start_process(self, theirs: socket.socket, config: EngineConfig, progress: bool,
                       listen_path: str | None) -> dict:
        fd = theirs.fileno()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH")) if p)
        self.process = subprocess.Popen(
            [*self.core_command, str(fd), str(os.getpid())],
            pass_fds=(fd,), env=env, cwd=str(_ROOT))
        theirs.close()
        try:
            self.conn.send((config, progress, listen_path))
            kind, value = self.conn.recv()  # blocks while the model loads
        except (EOFError, OSError):
            code = self.process.wait()
            self.conn.close()
            raise EngineDeadError(f"the engine process exited while starting (exit code {code})") from None
        if kind != "ready":
            self.process.wait(30)
            self.conn.close()
            raise EngineDeadError(f"the engine failed to start: {value}")
        return value

    def _start_thread(self, theirs: socket.socket, engine: Any, owns_engine: bool) -> dict:
        from .engine_core import EngineCore, engine_info

        core_conn = Connection(theirs.detach())

        def run() -> None:
            try:
                EngineCore(engine, core_conn).run()
            finally:
                core_conn.close()  # the reader sees EOF
                if owns_engine:
                    engine.shutdown()

        self._core_thread = threading.Thread(target=run, name="pagoda-engine", daemon=True)
        self._core_thread.start()
        return engine_info(engine)

    # -- state ---------------------------------------------------------------------------------------------
    def is_alive(self) -> bool:
        return self.error is None and not self._stopping and self._reader.is_alive()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop the core (its process exits, releasing the model and the KV cache). Idempotent."""
        if self._stopping:
            return
        self._stopping = True
        try:
            self._send(("shutdown",))
        except OSError:
            pass
        if self.process is not None:
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("the engine process did not stop in %.0f s: killing it", timeout)
                self.process.kill()
                self.process.wait()
        elif self._core_thread is not None and threading.current_thread() is not self._core_thread:
            self._core_thread.join(timeout)
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout)
        self.conn.close()

    # -- sending -------------------------------------------------------------------------------------------
    def _send(self, message: tuple) -> None:
        with self._send_lock:
            self.conn.send(message)

    def add(self, request_id: str, prompt, params, tenant: str | None, sink: Sink) -> None:
        """Queue a validated request (`prompt` an int64 array); its deltas go to `sink`."""
        if not self.is_alive():
            raise EngineDeadError(self.error or "the engine has been shut down")
        with self._sinks_lock:
            if self._closed:
                raise EngineDeadError(self.error or "the engine has been shut down")
            self._sinks[request_id] = sink
        try:
            self._send(("add", request_id, prompt, params, tenant))
        except OSError as e:
            with self._sinks_lock:
                self._sinks.pop(request_id, None)
            raise EngineDeadError(self.error or f"the engine is unreachable: {e}") from None

    def abort(self, request_id: str) -> None:
        if self.is_alive():
            try:
                self._send(("abort", request_id))
            except OSError:
                pass

    def call(self, name: str, *args, timeout: float | None = 30.0) -> Any:
        """A pin / unpin / stats / pins call, answered by the core between steps (blocking)."""
        if not self.is_alive():
            raise EngineDeadError(self.error or "the engine has been shut down")
        call_id = next(self._call_ids)
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._calls[call_id] = future
        try:
            self._send(("call", call_id, name, args))
        except OSError as e:
            self._calls.pop(call_id, None)
            raise EngineDeadError(self.error or f"the engine is unreachable: {e}") from None
        try:
            return future.result(timeout)
        finally:
            self._calls.pop(call_id, None)

    # -- receiving -----------------------------------------------------------------------------------------
    def _read(self) -> None:
        try:
            while True:
                message = self.conn.recv()
                kind = message[0]
                if kind == "step":
                    self._route(message[1])
                elif kind == "rejected":
                    self._route_error(message[1], error_from_tuple(message[2]))
                elif kind == "reply":
                    _, call_id, ok, value = message
                    future = self._calls.get(call_id)
                    if future is not None:
                        future.set_result(value) if ok else future.set_exception(error_from_tuple(value))
                elif kind == "dead":
                    self.error = message[1]
                    return
        except (EOFError, OSError):
            if not self._stopping and self.error is None:
                self.error = self._exit_reason()
        except BaseException as e:  # noqa: BLE001 - the reader must fail every request, not vanish
            log.exception("the engine reader failed")
            self.error = f"the engine connection failed: {e!r}"
        finally:
            self._fail_all(self.error or "the engine has been shut down")

    def _exit_reason(self) -> str:
        if self.process is None:
            return "the engine loop stopped"
        try:
            code = self.process.wait(2)
        except subprocess.TimeoutExpired:
            return "the engine process stopped answering"
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        return f"the engine process died ({how})"

    def _route(self, tuples: list[tuple]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list] = {}
        with self._sinks_lock:
            for t in tuples:
                sink = self._sinks.pop(t[0], None) if t[3] else self._sinks.get(t[0])
                if sink is not None:
                    by_loop.setdefault(sink[0], []).append((sink[1], delta_from_tuple(t)))
        for loop, items in by_loop.items():
            self._wake(loop, items)

    def _route_error(self, request_id: str, error: Exception) -> None:
        with self._sinks_lock:
            sink = self._sinks.pop(request_id, None)
        if sink is not None:
            self._wake(sink[0], [(sink[1], error)])

    def _wake(self, loop: asyncio.AbstractEventLoop, items: list) -> None:
        try:
            loop.call_soon_threadsafe(_deliver, items)
        except RuntimeError:  # that event loop is closed: its requests have nobody to stream to
            for _, d in items:
                if isinstance(d, StreamDelta) and not d.finished:
                    self.abort(d.request_id)

    def _fail_all(self, reason: str) -> None:
        with self._sinks_lock:
            sinks, self._sinks, self._closed = self._sinks, {}, True
        by_loop: dict[asyncio.AbstractEventLoop, list] = {}
        for rid, (loop, queue) in sinks.items():
            by_loop.setdefault(loop, []).append((queue, EngineDeadError(reason)))
        for loop, items in by_loop.items():
            self._wake(loop, items)
        for future in list(self._calls.values()):
            if not future.done():
                future.set_exception(EngineDeadError(reason))


def _deliver(items: list) -> None:
    for queue, item in items:
        queue.put_nowait(item)
