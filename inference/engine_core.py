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
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection

from .block_manager import Pin
from .engine import LLMEngine
from .wire import delta_to_tuple, error_to_tuple

log = logging.getLogger("inference")

_IDLE_POLL_S = 1.0  # while idle, how often to check that the parent is still there


class EngineCore:
    """Runs `engine` against the commands arriving on `conn` until "shutdown", EOF, or a crash."""

    def __init__(self, engine: LLMEngine, conn: Connection, parent_pid: int | None = None):
        self.engine = engine
        self.conn = conn
        self.parent_pid = parent_pid  # exit when this process is gone (the core's parent died)
        self._stopping = False

    def run(self) -> None:
        engine, conn = self.engine, self.conn
        try:
            while not self._stopping:
                if not engine.has_unfinished():
                    self._wait_idle()
                while not self._stopping and conn.poll(0):
                    self._handle(conn.recv())
                if self._stopping:
                    break
                if engine.has_unfinished():
                    deltas = engine.step()
                    if deltas:
                        conn.send(("step", [delta_to_tuple(d) for d in deltas]))
        except (EOFError, OSError, BrokenPipeError):
            pass  # the frontend is gone: nobody is left to serve
        except BaseException as e:  # noqa: BLE001 - a dead loop must say why
            reason = f"engine loop crashed: {e!r}"
            log.error("%s\n%s", reason, traceback.format_exc())
            try:
                conn.send(("dead", reason))
            except OSError:
                pass

    def _wait_idle(self) -> None:
        while not self.conn.poll(_IDLE_POLL_S):
            if self.parent_pid is not None and os.getppid() != self.parent_pid:
                raise EOFError("the parent process is gone")

    def _handle(self, message: tuple) -> None:
        kind = message[0]
        if kind == "add":
            _, request_id, prompt, params, tenant = message
            try:
                self.engine.add_request(request_id, prompt.tolist(), params, tenant, validated=prompt)
            except Exception as e:  # noqa: BLE001 - handed back to the caller
                self.conn.send(("rejected", request_id, error_to_tuple(e)))
        elif kind == "abort":
            delta = self.engine.abort(message[1])
            if delta is not None:
                self.conn.send(("step", [delta_to_tuple(delta)]))
        elif kind == "call":
            _, call_id, name, args = message
            getattr(self, "_call_" + name)(call_id, *args)
        elif kind == "shutdown":
            self._stopping = True
        else:
            raise ValueError(f"unknown engine command {kind!r}")

    def _reply(self, call_id: int, ok: bool, value) -> None:
        self.conn.send(("reply", call_id, ok, error_to_tuple(value) if not ok else value))

    # -- calls (answered by "reply") --------------------------------------------------------------------
    def _call_pin(self, call_id: int, key: str, token_ids: list[int], tenant: str | None) -> None:
        def on_pinned(result: Pin | Exception) -> None:
            if isinstance(result, Exception):
                self._reply(call_id, False, result)
            else:
                self._reply(call_id, True, _pin_info(result))

        try:
            self.engine.add_pin(key, token_ids, tenant, on_pinned)
        except Exception as e:  # noqa: BLE001
            self._reply(call_id, False, e)

    def _call_unpin(self, call_id: int, key: str) -> None:
        self._reply(call_id, True, self.engine.unpin(key))

    def _call_stats(self, call_id: int) -> None:
        self._reply(call_id, True, self.engine.stats())

    def _call_pins(self, call_id: int) -> None:
        self._reply(call_id, True, {k: _pin_info(p) for k, p in self.engine.block_manager.pins.items()})


def _pin_info(pin: Pin) -> tuple:
    return (pin.key, pin.tenant, pin.num_tokens, len(pin.block_ids), pin.num_prompt_tokens)


def engine_info(engine: LLMEngine) -> dict:
    """What a frontend needs to know of the engine it talks to (sent once, in "ready")."""
    return {"model_name": engine.model_name, "max_model_len": engine.max_model_len,
            "vocab_size": engine.model_args.vocab_size}


def main() -> None:
    """The child process: `python -m inference.engine_core FD PARENT_PID`. Reads its EngineConfig from
    the connection, builds the engine, says "ready" (or "failed"), then runs the loop."""
    fd, parent_pid = int(sys.argv[1]), int(sys.argv[2])
    # Ctrl-C in a terminal reaches the whole process group: the server decides when the core stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s engine-core %(levelname)s %(message)s")
    conn = Connection(fd)
    config, progress = conn.recv()
    try:
        engine = LLMEngine(config, progress=progress)
    except BaseException as e:  # noqa: BLE001 - reported to the server, which shows it on /health
        log.error("engine failed to start\n%s", traceback.format_exc())
        conn.send(("failed", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ready", engine_info(engine)))
    try:
        EngineCore(engine, conn, parent_pid).run()
    finally:
        engine.shutdown()


if __name__ == "__main__":
    main()
