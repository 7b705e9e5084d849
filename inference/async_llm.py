"""AsyncLLM: the engine client for servers. The engine's step loop (EngineCore) runs in a child
process, so it never shares a GIL with the web layer; this frontend tokenizes, validates and streams.
Requests come from any thread or event loop, and each request's deltas flow back to the loop that
asked for them, one wake-up of that loop per engine step.
"""
from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass
from typing import AsyncIterator

from .config import EngineConfig
from .core_client import CoreClient
from .engine import LLMEngine, validate_request
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
    """Asyncio-friendly front of an engine core (see the README's engine section).

    `AsyncLLM(config)` starts the core in a child process and returns once the model is loaded; with
    `listen_path`, other processes' AsyncLLM(config, connect=listen_path) share that core.
    `AsyncLLM(config, process=False)` or `AsyncLLM(engine=LLMEngine(...))` runs the core in a thread of
    this process over the same messages; `self.engine` is then the LLMEngine (None otherwise).
    """

    def __init__(self, config: EngineConfig | None = None, progress: bool = True, engine: LLMEngine | None = None,
                 process: bool = True, listen_path: str | None = None, connect: str | None = None):
        config = config or (engine.config if engine is not None else EngineConfig())
        self.engine: LLMEngine | None = None
        if connect is not None:
            self.tokenizer = _load_tokenizer(config.model)
            self.core = CoreClient(connect=connect)
        elif engine is None and process:
            self.tokenizer = _load_tokenizer(config.model)
            self.core = CoreClient(config, progress=progress, listen_path=listen_path)
        else:
            owns = engine is None  # then the core's thread shuts it down (a tensor-parallel one's workers)
            self.engine = engine or LLMEngine(config, progress=progress)
            self.tokenizer = self.engine.tokenizer
            self.core = CoreClient(engine=self.engine, owns_engine=owns)
        # Special tokens, longest first (a chat turn's text starts with one): see encode_chat.
        self._special_tokens = tuple(sorted(self.tokenizer.all_special_tokens, key=len, reverse=True)) or ("\0",)
        self._system_prefix = functools.lru_cache(maxsize=256)(self._render_system_prefix)
        self.model_name: str = self.core.info["model_name"]
        self.max_model_len: int = self.core.info["max_model_len"]
        self.vocab_size: int = self.core.info["vocab_size"]

    # -- lifecycle -----------------------------------------------------------------------------------
    @property
    def error(self) -> str | None:
        """Why the engine stopped serving (its process died, its loop crashed), or None."""
        return self.core.error

    def is_alive(self) -> bool:
        return self.core.is_alive()

    def shutdown(self, timeout: float = 10.0) -> None:
        self.core.shutdown(timeout)

    # -- requests ------------------------------------------------------------------------------------
    def encode_chat(self, messages: list[dict], add_generation_prompt: bool = True) -> list[int]:
        """The chat template's tokens for `messages`. A tenant's system turn is the same text in every
        chat: its tokens are kept (per system prompt) and only the rest is tokenized, where the rest
        starts with a special token (the tokenizer splits there, so the result is the same)."""
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                                  tokenize=False)
        system = messages[0].get("content") if messages and messages[0].get("role") == "system" else None
        if isinstance(system, str) and len(messages) > 1:
            prefix_text, prefix_ids = self._system_prefix(system)
            rest = text[len(prefix_text):]
            if text.startswith(prefix_text) and rest.startswith(self._special_tokens):
                return prefix_ids + self.tokenizer.encode(rest, add_special_tokens=False)
        return self.tokenizer.encode(text, add_special_tokens=False)

    def encode_system_prefix(self, system_prompt: str) -> list[int]:
        """The tokens a chat prompt with this system prompt starts with: what gets pinned."""
        return list(self._system_prefix(system_prompt)[1])

    def _render_system_prefix(self, system_prompt: str) -> tuple[str, list[int]]:
        text = self.tokenizer.apply_chat_template([{"role": "system", "content": system_prompt}],
                                                  add_generation_prompt=False, tokenize=False)
        return text, self.tokenizer.encode(text, add_special_tokens=False)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def validate(self, prompt_token_ids: list[int], params: SamplingParams):
        """Raise InvalidRequestError for a bad request (before anything is queued); the checked prompt."""
        return validate_request(prompt_token_ids, params, self.vocab_size, self.max_model_len, self.tokenizer)

    async def generate(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams,
                       tenant: str | None = None) -> AsyncIterator[StreamDelta]:
        """Stream a request's deltas. Leaving the loop early (or cancellation) aborts the request."""
        if params.n != 1:
            raise InvalidRequestError("streaming takes n=1; send n requests", field="n")
        validated = self.validate(prompt_token_ids, params)
        deltas: asyncio.Queue = asyncio.Queue()
        self.core.add(request_id, validated, params, tenant, (asyncio.get_running_loop(), deltas))
        finished = False
        try:
            while True:
                d = await deltas.get()
                # A reader that fell behind the engine gets what has piled up as one delta: one frame
                # out instead of one per step, so a loaded web layer catches up instead of lagging.
                while not deltas.empty() and isinstance(d, StreamDelta) and not d.finished and not d.error:
                    d = _merge(d, deltas.get_nowait())
                if isinstance(d, Exception):  # refused by the core (queue full) or the engine died
                    finished = True
                    raise d
                if d.error:
                    finished = True  # the engine has already let go of it
                    raise RequestFailedError(d.error)
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
        self.core.abort(request_id)

    # -- prefixes --------------------------------------------------------------------------------------
    def pin_prefix(self, key: str, prompt: list[int] | str, tenant: str | None = None,
                   timeout: float = 300.0) -> PinInfo:
        """Compute `prompt` once and keep its whole blocks in the cache until unpinned (blocking)."""
        token_ids = self.encode_system_prefix(prompt) if isinstance(prompt, str) else list(prompt)
        return PinInfo(*self.core.call("pin", key, token_ids, tenant, timeout=timeout))

    def unpin_prefix(self, key: str) -> bool:
        return self.core.call("unpin", key)

    def pins(self) -> dict[str, PinInfo]:
        return {k: PinInfo(*v) for k, v in self.core.call("pins").items()}

    def stats(self) -> dict:
        """The engine's counters (engine.stats()), plus alive / error; answered by the core between steps."""
        try:
            stats = self.core.call("stats", timeout=10.0)
        except EngineDeadError:
            stats = {"model": self.model_name}
        stats["alive"] = self.is_alive()
        stats["error"] = self.error
        return stats


def _merge(first: StreamDelta, then: StreamDelta | Exception) -> StreamDelta | Exception:
    """Two consecutive deltas of one request as one (an error wins: the stream ends with it)."""
    if isinstance(then, Exception) or then.error:
        return then
    logprobs = (first.logprobs or []) + (then.logprobs or []) if (first.logprobs or then.logprobs) else None
    return StreamDelta(then.request_id, first.text + then.text, first.token_ids + then.token_ids, then.finished,
                       then.finish_reason, then.num_prompt_tokens, then.num_cached_tokens, then.num_output_tokens,
                       then.stop_reason, logprobs, None, {**first.metrics, **then.metrics},
                       first.prompt_logprobs or then.prompt_logprobs)


def _load_tokenizer(model: str):
    from .model_loader import load_hf_config, load_tokenizer, resolve_model_path

    path = resolve_model_path(model)  # converts the embedded default once, here, before the core starts
    return load_tokenizer(path, load_hf_config(path)).tokenizer
