"""One engine request seen from the API: its deltas, what they add up to, and its clock.

    run = EngineRun(engine, request_id, prompt_ids, params, tenant=tenant.engine_key)
    await run.start()            # admitted and the first delta is in: errors surface before any byte is sent
    async for delta in run:      # that first delta, then the rest (stream) ...
    await run.collect()          # ... or all of it at once (non-stream)
    await run.aclose()           # always: aborts the request if it has not finished (frees its blocks)

A call with n choices drives n runs through a RunGroup (same verbs; deltas come as (index, delta)).
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from inference import SamplingParams, StreamDelta
from observability import track_request


class EngineRun:
    """Accumulates text, token ids, logprobs, counts and finish reason of one engine request."""

    def __init__(self, engine: Any, request_id: str, prompt_token_ids: list[int], params: SamplingParams,
                 tenant: str | None, profile: str | None = None):
        self.engine = engine
        self.request_id = request_id
        self.params = params
        self.prompt_token_ids = prompt_token_ids
        self.prompt_logprobs: list | None = None  # with params.prompt_logprobs: one entry per prompt token
        self.num_prompt_tokens = len(prompt_token_ids)
        self.num_cached_tokens = 0
        self.num_output_tokens = 0
        self.text = ""
        self.token_ids: list[int] = []
        self.logprobs: list[dict[int, float]] = []
        self.finish_reason: str | None = None
        self.admitted = False  # the engine took the request (its first delta came back)
        self.first_token_at: float | None = None
        self._deltas = engine.generate(request_id, prompt_token_ids, params, tenant=tenant)
        self._first: StreamDelta | None = None
        # Latency histograms, per-tenant counters and the "pagoda.requests" log line (observability).
        self.recorder = track_request(request_id, tenant=tenant, profile=profile, source="api")

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def _take(self, delta: StreamDelta) -> StreamDelta:
        self.recorder.on_delta(delta)
        if self.first_token_at is None and delta.token_ids:
            self.first_token_at = time.monotonic()
        self.text += delta.text
        self.token_ids += delta.token_ids
        self.logprobs += delta.logprobs or []
        if delta.prompt_logprobs is not None:
            self.prompt_logprobs = delta.prompt_logprobs
        self.num_prompt_tokens = delta.num_prompt_tokens
        self.num_cached_tokens = delta.num_cached_tokens
        self.num_output_tokens = delta.num_output_tokens
        if delta.finished:
            self.finish_reason = delta.finish_reason
        return delta

    async def start(self) -> None:
        """Submit the request and wait for its first delta. Raises the engine's error (queue full,
        prompt too long, engine dead) while the caller can still answer with a status code."""
        try:
            self._first = self._take(await anext(self._deltas))
        except Exception as exc:
            self.recorder.finish(error=exc)
            raise
        self.admitted = True

    async def __aiter__(self) -> AsyncIterator[StreamDelta]:
        if self._first is not None:
            first, self._first = self._first, None
            yield first
        if self.finished:
            return
        async for delta in self._deltas:
            yield self._take(delta)
            if delta.finished:
                return

    async def collect(self) -> None:
        async for _ in self:
            pass

    async def aclose(self) -> None:
        """Close the engine's stream: an unfinished request is aborted and its blocks freed at once."""
        if not self.finished:
            self.finish_reason = "abort"
        await self._deltas.aclose()
        self.recorder.finish()  # once: the last delta's reason, or "abort"

    def usage(self) -> dict:
        return openai_usage(self.num_prompt_tokens, self.num_output_tokens, self.num_cached_tokens)


class RunGroup:
    """The n choices of one call: one EngineRun each, started together, read merged, closed together.

    Usage adds up as OpenAI counts it: the prompt once (the first choice's; the others share its
    cached prefix), the completions of every choice.
    """

    def __init__(self, runs: list[EngineRun]):
        self.runs = runs

    @property
    def admitted(self) -> bool:
        return any(run.admitted for run in self.runs)

    @property
    def finish_reason(self) -> str | None:
        return self.runs[0].finish_reason

    @property
    def num_prompt_tokens(self) -> int:
        return self.runs[0].num_prompt_tokens

    @property
    def num_cached_tokens(self) -> int:
        return self.runs[0].num_cached_tokens

    @property
    def num_output_tokens(self) -> int:
        return sum(run.num_output_tokens for run in self.runs)

    @property
    def first_token_at(self) -> float | None:
        return min((run.first_token_at for run in self.runs if run.first_token_at is not None), default=None)

    async def start(self) -> None:
        """Start every choice; if any fails, raise its error (the caller closes them all)."""
        results = await asyncio.gather(*(run.start() for run in self.runs), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def deltas(self) -> AsyncIterator[tuple[int, StreamDelta]]:
        """(choice index, delta) as they come. Several choices are read by one task each; leaving
        early cancels those tasks (their engine requests are aborted by aclose())."""
        if len(self.runs) == 1:
            async for delta in self.runs[0]:
                yield 0, delta
            return
        queue: asyncio.Queue = asyncio.Queue()
        done = object()

        async def pump(index: int, run: EngineRun) -> None:
            try:
                async for delta in run:
                    queue.put_nowait((index, delta))
            except Exception as exc:  # noqa: BLE001 - re-raised by the reader
                queue.put_nowait((index, exc))
            finally:
                queue.put_nowait((index, done))

        tasks = [asyncio.create_task(pump(i, run)) for i, run in enumerate(self.runs)]
        try:
            remaining = len(tasks)
            while remaining:
                index, item = await queue.get()
                if item is done:
                    remaining -= 1
                elif isinstance(item, Exception):
                    raise item
                else:
                    yield index, item
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def collect(self) -> None:
        async with aclosing(self.deltas()) as deltas:
            async for _ in deltas:
                pass

    async def aclose(self) -> None:
        for run in self.runs:
            await run.aclose()

    def usage(self) -> dict:
        return openai_usage(self.num_prompt_tokens, self.num_output_tokens, self.num_cached_tokens)


def openai_usage(num_prompt_tokens: int, num_output_tokens: int, num_cached_tokens: int) -> dict:
    """OpenAI's `usage` object."""
    return {
        "prompt_tokens": num_prompt_tokens,
        "completion_tokens": num_output_tokens,
        "total_tokens": num_prompt_tokens + num_output_tokens,
        "prompt_tokens_details": {"cached_tokens": num_cached_tokens},
    }
