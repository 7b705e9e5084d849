"""AsyncLLM: the engine client for servers. The step loop runs in one background thread; requests come
from any thread or event loop, and each request's deltas flow back to the loop that asked for them.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import traceback
from dataclasses import dataclass
from typing import AsyncIterator, Callable

from .block_manager import Pin
from .config import EngineConfig
from .engine import LLMEngine
from .errors import EngineDeadError, InvalidRequestError, RequestFailedError
from .outputs import StreamDelta
from .sampling_params import SamplingParams

log = logging.getLogger("inference")


@dataclass
class PinInfo:
    key: str
    tenant: str | None
    num_tokens: int  # tokens covered by pinned (whole) blocks
    num_blocks: int
    num_prompt_tokens: int  # tokens asked to be pinned


class AsyncLLM:
    """Thread-safe, asyncio-friendly front of an LLMEngine (see the README's engine section)."""

    def __init__(self, config: EngineConfig | None = None, progress: bool = True, engine: LLMEngine | None = None):
        self._owns_engine = engine is None  # then the loop shuts it down (a tensor-parallel one's workers)
        self.engine = engine or LLMEngine(config, progress=progress)
        self.tokenizer = self.engine.tokenizer
        self.model_name = self.engine.model_name
        self.max_model_len = self.engine.max_model_len
        self.error: str | None = None
        self._commands: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._lock = threading.Lock()  # held while the loop touches the engine; stats() takes it too
        self._sinks: dict[str, Callable[[StreamDelta], None]] = {}
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="pagoda-engine", daemon=True)
        self._thread.start()

    # -- lifecycle -----------------------------------------------------------------------------------
    def is_alive(self) -> bool:
        return self._thread.is_alive() and self.error is None and not self._stopping

    def shutdown(self, timeout: float = 10.0) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _check_alive(self) -> None:
        if not self.is_alive():
            raise EngineDeadError(self.error or "the engine has been shut down")

    # -- the loop --------------------------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            while not self._stopping:
                with self._lock:
                    self._run_commands()
                    busy = self.engine.has_unfinished()
                    deltas = self.engine.step() if busy else []
                for d in deltas:
                    self._emit(d)
                if not busy:
                    self._wake.wait(0.5)
                    self._wake.clear()
        except BaseException as e:  # noqa: BLE001 - a dead loop must say why, and fail every request
            self.error = f"engine loop crashed: {e!r}"
            log.error("%s\n%s", self.error, traceback.format_exc())
        finally:
            self._fail_all(self.error or "the engine has been shut down")
            if self._owns_engine:
                try:
                    self.engine.shutdown()
                except Exception:  # noqa: BLE001 - the loop is ending either way
                    log.exception("shutting the engine down failed")

    def _run_commands(self) -> None:
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            command()

    def _submit(self, command: Callable[[], None]) -> None:
        self._check_alive()
        self._commands.put(command)
        self._wake.set()

    def _emit(self, delta: StreamDelta) -> None:
        sink = self._sinks.get(delta.request_id)
        if sink is not None:
            if delta.finished:
                del self._sinks[delta.request_id]
            sink(delta)

    def _fail_all(self, reason: str) -> None:
        for rid, sink in list(self._sinks.items()):
            sink(StreamDelta(rid, "", [], True, "error", 0, 0, 0, error=reason))
        self._sinks.clear()

    # -- requests ------------------------------------------------------------------------------------
    def encode_chat(self, messages: list[dict], add_generation_prompt: bool = True) -> list[int]:
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                                  tokenize=False)
        return self.tokenizer.encode(text, add_special_tokens=False)

    def encode_system_prefix(self, system_prompt: str) -> list[int]:
        """The tokens a chat prompt with this system prompt starts with: what gets pinned."""
        return self.encode_chat([{"role": "system", "content": system_prompt}], add_generation_prompt=False)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    async def generate(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams,
                       tenant: str | None = None) -> AsyncIterator[StreamDelta]:
        """Stream a request's deltas. Leaving the loop early (or cancellation) aborts the request."""
        if params.n != 1:
            raise InvalidRequestError("streaming takes n=1; send n requests", field="n")
        validated = self.engine.validate(prompt_token_ids, params)  # here, off the engine's loop
        self._check_alive()
        loop = asyncio.get_running_loop()
        deltas: asyncio.Queue[StreamDelta] = asyncio.Queue()
        added: concurrent.futures.Future = concurrent.futures.Future()

        def sink(d: StreamDelta) -> None:
            loop.call_soon_threadsafe(deltas.put_nowait, d)

        def add() -> None:
            try:
                self.engine.add_request(request_id, prompt_token_ids, params, tenant, validated=validated)
                self._sinks[request_id] = sink
                added.set_result(True)
            except Exception as e:  # noqa: BLE001 - handed back to the caller
                added.set_exception(e)

        self._submit(add)
        await asyncio.wrap_future(added)
        finished = False
        try:
            while True:
                d = await deltas.get()
                if d.error:
                    finished = True  # the engine has already let go of it
                    if d.finish_reason == "error" and self.is_alive():
                        raise RequestFailedError(d.error)
                    raise EngineDeadError(d.error)
                finished = d.finished
                yield d
                if finished:
                    return
        finally:
            if not finished:
                self.abort(request_id)

    def abort(self, request_id: str) -> None:
        """Abort a request from any thread; its blocks are freed before the next step, and its stream
        (if someone still reads it) ends with finish_reason "abort"."""
        def command() -> None:
            sink = self._sinks.pop(request_id, None)
            delta = self.engine.abort(request_id)
            if sink is not None and delta is not None:
                sink(delta)

        if self.is_alive():
            self._submit(command)

    # -- prefixes --------------------------------------------------------------------------------------
    def pin_prefix(self, key: str, prompt: list[int] | str, tenant: str | None = None,
                   timeout: float = 300.0) -> PinInfo:
        """Compute `prompt` once and keep its whole blocks in the cache until unpinned (blocking)."""
        token_ids = self.encode_system_prefix(prompt) if isinstance(prompt, str) else list(prompt)
        done: concurrent.futures.Future = concurrent.futures.Future()

        def on_pinned(result: Pin | Exception) -> None:
            done.set_exception(result) if isinstance(result, Exception) else done.set_result(result)

        def command() -> None:
            try:
                self.engine.add_pin(key, token_ids, tenant, on_pinned)
            except Exception as e:  # noqa: BLE001
                done.set_exception(e)

        self._submit(command)
        pin: Pin = done.result(timeout)
        return PinInfo(pin.key, pin.tenant, pin.num_tokens, len(pin.block_ids), pin.num_prompt_tokens)

    def unpin_prefix(self, key: str) -> bool:
        done: concurrent.futures.Future = concurrent.futures.Future()
        self._submit(lambda: done.set_result(self.engine.unpin(key)))
        return done.result(30)

    def pins(self) -> dict[str, PinInfo]:
        with self._lock:
            return {k: PinInfo(p.key, p.tenant, p.num_tokens, len(p.block_ids), p.num_prompt_tokens)
                    for k, p in self.engine.block_manager.pins.items()}

    def stats(self) -> dict:
        with self._lock:
            stats = self.engine.stats()
        stats["alive"] = self.is_alive()
        stats["error"] = self.error
        return stats
