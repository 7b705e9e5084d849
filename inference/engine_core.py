"""EngineCore: the engine's busy loop (scheduler, block manager, model runner), fed by commands and
answering with one message per step.

It runs in a child process of the server (`python -m inference.engine_core`, started by
`core_client.CoreProcess`), so the step loop never shares a GIL with the web layer; or, for tests
that need the engine's internals, in a thread of the same process. Either way it talks over one
`multiprocessing.connection.Connection` (a socket pair), with the same messages:

  frontend -> core    ("add", request_id, prompt: array("q"), params, tenant)
                      ("abort", request_id)
                      ("call", call_id, name, args)   # pin / unpin / stats / pins, answered by "reply"
                      ("shutdown",)
  core -> frontend    ("ready", info) | ("failed", error)       # once, when the engine is built (process)
                      ("step", [delta tuple, ...])              # one per step that produced output
                      ("rejected", request_id, error tuple)     # an "add" refused (queue full, bad id)
                      ("reply", call_id, ok, value)
                      ("dead", reason)                          # the loop crashed; the core exits

A step's deltas travel as plain tuples (`wire.delta_to_tuple`): one pickle of a list, not one
object per token.

A request whose structured-output constraint is not compiled yet waits outside the engine while a
thread compiles it (`Grammars.compile_async`), so that the running streams keep stepping; it is added
when the compile is done (or rejected with the compile's error).

Several web processes of one server can share the core (PAGODA_WEB_PROCESSES): the one that started
it is its first frontend, and the core also listens on a Unix socket (`listen_path`) where the others
connect. Each frontend gets "ready" on connecting, and only its own requests' deltas and replies. The
core ends with its first frontend; another one leaving aborts that one's requests.
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import traceback
from multiprocessing.connection import Connection, wait

from .block_manager import Pin
from .engine import LLMEngine
from .errors import InvalidRequestError
from .outputs import StreamDelta
from .wire import delta_to_tuple, error_to_tuple

log = logging.getLogger("inference")

_IDLE_POLL_S = 1.0  # while idle, how often to check that the parent is still there


class EngineCore:
    """Runs `engine` against the commands of its frontends until "shutdown", the first frontend's EOF,
    or a crash. `listen_path`: also accept more frontends on this Unix socket."""

    def __init__(self, engine: LLMEngine, conn: Connection, parent_pid: int | None = None,
                 listen_path: str | None = None):
        self.engine = engine
        self.conn = conn  # the first frontend: the core lives as long as it does
        self.frontends: list[Connection] = [conn]
        self.owner: dict[str, Connection] = {}  # request id -> the frontend that sent it
        self.parent_pid = parent_pid  # exit when this process is gone (the core's parent died)
        self.listener = _listen(listen_path) if listen_path else None
        self._stopping = False
        self._sender = conn  # the frontend whose command is being handled
        # Requests waiting for their grammar's compile: request id -> (future, its "add" message, sender).
        self.compiling: dict[str, tuple] = {}
        # A compile thread writes a byte here when it is done, ending the idle loop's wait.
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._wake_write.setblocking(False)
        engine.grammars.warm_up()  # not on the loop at the first structured-output request

    def run(self) -> None:
        engine = self.engine
        try:
            while not self._stopping:
                idle = not engine.has_unfinished()
                self._serve_commands(_IDLE_POLL_S if idle else 0)
                if self._stopping:
                    break
                if self.compiling:
                    self._add_compiled()
                if engine.has_unfinished():
                    self._send_deltas(engine.step())
        except _FrontendGone:
            pass  # the first frontend (the server that owns the core) is gone: nobody is left to serve
        except BaseException as e:  # noqa: BLE001 - a dead loop must say why
            reason = f"engine loop crashed: {e!r}"
            log.error("%s\n%s", reason, traceback.format_exc())
            for conn in self.frontends:
                try:
                    conn.send(("dead", reason))
                except OSError:
                    pass
        finally:
            if self.listener is not None:
                self.listener.close()
            self._wake_read.close()
            self._wake_write.close()

    def _serve_commands(self, timeout: float) -> None:
        """Handle every command waiting on any frontend; wait up to `timeout` s for one when idle."""
        waitables = [*self.frontends, *([self.listener] if self.listener is not None else []), self._wake_read]
        ready = wait(waitables, timeout)
        if not ready and timeout and self.parent_pid is not None and os.getppid() != self.parent_pid:
            raise _FrontendGone()
        for obj in ready:
            if obj is self.listener:
                self._accept()
                continue
            if obj is self._wake_read:
                self._drain_wakes()
                continue
            try:
                while not self._stopping and obj.poll(0):
                    self._sender = obj
                    self._handle(obj.recv())
            except (EOFError, OSError):
                self._drop(obj)

    def _accept(self) -> None:
        sock, _ = self.listener.accept()
        conn = Connection(sock.detach())
        conn.send(("ready", engine_info(self.engine)))
        self.frontends.append(conn)

    def _drop(self, conn: Connection) -> None:
        if conn is self.conn:
            raise _FrontendGone()
        if conn not in self.frontends:
            return  # dropped already
        self.frontends.remove(conn)
        for request_id in [r for r, c in self.owner.items() if c is conn]:
            self.owner.pop(request_id)
            self.compiling.pop(request_id, None)
            self.engine.abort(request_id)  # its blocks are freed now: nobody will read it
        conn.close()

    def _send_deltas(self, deltas: list) -> None:
        if not deltas:
            return
        if len(self.frontends) == 1:
            self._send(self.conn, ("step", [delta_to_tuple(d) for d in deltas]))
            for d in deltas:
                if d.finished:
                    self.owner.pop(d.request_id, None)
            return
        by_frontend: dict[Connection, list] = {}
        for d in deltas:
            conn = (self.owner.pop if d.finished else self.owner.get)(d.request_id, self.conn)
            by_frontend.setdefault(conn, []).append(delta_to_tuple(d))
        for conn, tuples in by_frontend.items():
            self._send(conn, ("step", tuples))

    def _send(self, conn: Connection, message: tuple) -> None:
        try:
            conn.send(message)
        except OSError:
            self._drop(conn)

    def _handle(self, message: tuple) -> None:
        kind = message[0]
        if kind == "add":
            self._add(message)
        elif kind == "abort":
            delta = self.engine.abort(message[1]) or self._abort_compiling(message[1])
            if delta is not None:
                self._send_deltas([delta])
        elif kind == "call":
            _, call_id, name, args = message
            getattr(self, "_call_" + name)(self._sender, call_id, *args)
        elif kind == "shutdown":
            if self._sender is self.conn:
                self._stopping = True
            else:
                self._drop(self._sender)  # a secondary frontend leaving
        else:
            raise ValueError(f"unknown engine command {kind!r}")

    def _add(self, message: tuple) -> None:
        _, request_id, prompt, params, tenant = message
        try:
            if request_id in self.compiling:
                raise InvalidRequestError(f"request id {request_id!r} is already running", field="request_id")
            constraint = params.structured_outputs
            compiling = self.engine.grammars.compile_async(constraint) if constraint is not None else None
            if compiling is not None:
                self.compiling[request_id] = (compiling, message, self._sender)
                compiling.add_done_callback(self._wake)
            else:
                self.engine.add_request(request_id, prompt.tolist(), params, tenant, validated=prompt)
            self.owner[request_id] = self._sender
        except Exception as e:  # noqa: BLE001 - handed back to the caller
            self._send(self._sender, ("rejected", request_id, error_to_tuple(e)))

    def _add_compiled(self) -> None:
        """Add (in arrival order) the waiting requests whose grammar is compiled; reject those whose
        constraint failed to compile."""
        for request_id, (future, message, sender) in list(self.compiling.items()):
            if not future.done():
                continue
            del self.compiling[request_id]
            self.owner.pop(request_id, None)
            if sender not in self.frontends:
                continue  # its frontend left meanwhile
            self._sender = sender
            error = future.exception()
            if error is None:
                self._add(message)
            else:
                self._send(sender, ("rejected", request_id, error_to_tuple(error)))

    def _abort_compiling(self, request_id: str) -> StreamDelta | None:
        waiting = self.compiling.pop(request_id, None)
        if waiting is None:
            return None
        prompt = waiting[1][2]
        return StreamDelta(request_id, "", [], True, "abort", len(prompt), 0, 0)

    def _wake(self, _future) -> None:
        try:
            self._wake_write.send(b"x")
        except OSError:  # the core has ended (closed), or the pipe is full: the loop is awake anyway
            pass

    def _drain_wakes(self) -> None:
        try:
            while self._wake_read.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _reply(self, conn: Connection, call_id: int, ok: bool, value) -> None:
        self._send(conn, ("reply", call_id, ok, error_to_tuple(value) if not ok else value))

    # -- calls (answered by "reply") --------------------------------------------------------------------
    def _call_pin(self, conn: Connection, call_id: int, key: str, token_ids: list[int], tenant: str | None) -> None:
        def on_pinned(result: Pin | Exception) -> None:
            if isinstance(result, Exception):
                self._reply(conn, call_id, False, result)
            else:
                self._reply(conn, call_id, True, _pin_info(result))

        try:
            self.engine.add_pin(key, token_ids, tenant, on_pinned)
        except Exception as e:  # noqa: BLE001
            self._reply(conn, call_id, False, e)

    def _call_unpin(self, conn: Connection, call_id: int, key: str) -> None:
        self._reply(conn, call_id, True, self.engine.unpin(key))

    def _call_stats(self, conn: Connection, call_id: int) -> None:
        self._reply(conn, call_id, True, self.engine.stats())

    def _call_pins(self, conn: Connection, call_id: int) -> None:
        self._reply(conn, call_id, True, {k: _pin_info(p) for k, p in self.engine.block_manager.pins.items()})


class _FrontendGone(Exception):
    """The first frontend closed its end (or its process died)."""


def _listen(path: str) -> socket.socket:
    """A Unix socket only this user can connect to, at `path` (replacing a stale one)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(path)
    finally:
        os.umask(old_umask)
    sock.listen(64)
    return sock


def _pin_info(pin: Pin) -> tuple:
    return (pin.key, pin.tenant, pin.num_tokens, len(pin.block_ids), pin.num_prompt_tokens)


def engine_info(engine: LLMEngine) -> dict:
    """What a frontend needs to know of the engine it talks to (sent once, in "ready")."""
    return {"model_name": engine.model_name, "max_model_len": engine.max_model_len,
            "vocab_size": engine.model_args.vocab_size}


def main() -> None:
    """The child process: `python -m inference.engine_core FD PARENT_PID`. Reads its EngineConfig (and
    where to listen for more frontends) from the connection, builds the engine, says "ready" (or
    "failed"), then runs the loop."""
    fd, parent_pid = int(sys.argv[1]), int(sys.argv[2])
    # Ctrl-C in a terminal reaches the whole process group: the server decides when the core stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s engine-core %(levelname)s %(message)s")
    conn = Connection(fd)
    config, progress, listen_path = conn.recv()
    try:
        engine = LLMEngine(config, progress=progress)
    except BaseException as e:  # noqa: BLE001 - reported to the server, which shows it on /health
        log.error("engine failed to start\n%s", traceback.format_exc())
        conn.send(("failed", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ready", engine_info(engine)))
    try:
        EngineCore(engine, conn, parent_pid, listen_path).run()
    finally:
        engine.shutdown()


if __name__ == "__main__":
    main()
