"""Pinned vs cold TTFT through /v1/chat/completions, as a user of a tenant feels it.

Pinned: the tenant "pinned", whose active system prompt (`system`, ~2,000 tokens) the server pinned
when its engine started; the client sends only its question (~50 tokens). Cold: the tenant "bench",
which has no system prompt, sending a system message of the same length that nobody pinned (another
one each time, so no earlier request's prefix is cached) and the same question: the same token
layout, [system turn, user turn]. One output token each; median over the questions. Then the pinned
turns again while `num_background` other streams decode (/v1/completions, long outputs).
"""
from __future__ import annotations

import asyncio
import contextlib
import statistics

from .clients import HttpSession, RequestResult, stream_api


async def _turns(session: HttpSession, key: str, model: str, messages_list: list[list[dict]]) -> list[RequestResult]:
    return [await stream_api(session, "chat", m, key, model, 1) for m in messages_list]


def _median(results: list[RequestResult], attr: str) -> float | None:
    values = [getattr(r, attr) for r in results if r.ok and getattr(r, attr) is not None]
    return statistics.median(values) if values else None


async def run_probe(url: str, pinned_key: str, cold_key: str, model: str, system_len_hint: int,
                    questions: list[str], cold_systems: list[str], num_background: int = 0,
                    background_prompts: list[list[int]] | None = None, background_output_len: int = 512) -> dict:
    """{"pinned_ttft_ms", "cold_ttft_ms", "cold_over_pinned", cached tokens, "busy_pinned_ttft_ms", ...}"""
    async with HttpSession(url, num_background + 2) as session:
        def user(q: str) -> list[dict]:
            return [{"role": "user", "content": q}]

        await _turns(session, pinned_key, model, [user("warm up " + questions[0])])
        pinned = await _turns(session, pinned_key, model, [user(q) for q in questions])
        cold = await _turns(session, cold_key, model, [[{"role": "system", "content": c}, *user(q)]
                                                      for c, q in zip(cold_systems, questions)])
        busy: list[RequestResult] = []
        if num_background:
            busy = await _beside_background(session, cold_key, model, pinned_key,
                                            [user(q) for q in questions], num_background,
                                            background_prompts or [[1000] * 16], background_output_len)
    failed = [r.error for r in pinned + cold + busy if not r.ok]
    out: dict = {"num_repeats": len(questions), "failed": len(failed), "errors": failed[:3]}
    p, c = _median(pinned, "ttft"), _median(cold, "ttft")
    if p is not None and c is not None:
        out.update(pinned_ttft_ms=1e3 * p, cold_ttft_ms=1e3 * c, cold_over_pinned=c / p,
                   pinned_cached_tokens=_median(pinned, "cached_tokens"),
                   cold_cached_tokens=_median(cold, "cached_tokens"),
                   prompt_tokens=_median(pinned, "prompt_tokens"))
    b = _median(busy, "ttft")
    if b is not None and p is not None:
        out.update(busy_pinned_ttft_ms=1e3 * b, busy_over_idle_pinned=b / p, num_background=num_background)
    return out


async def _beside_background(session: HttpSession, bg_key: str, model: str, pinned_key: str,
                             messages_list: list[list[dict]], num_background: int,
                             prompts: list[list[int]], output_len: int) -> list[RequestResult]:
    firsts = [RequestResult(ok=False) for _ in range(num_background)]

    async def stream_forever(n: int) -> None:
        result = firsts[n]
        while True:
            done = await stream_api(session, "completions", prompts[n % len(prompts)], bg_key, model, output_len,
                                    result)
            if not done.ok:
                await asyncio.sleep(0.1)  # a failing server: do not spin
            result = RequestResult(ok=False)

    tasks = [asyncio.create_task(stream_forever(n)) for n in range(num_background)]
    try:
        while not all(r.chunk_times or r.error for r in firsts):  # every background stream decodes
            await asyncio.sleep(0.05)
        return await _turns(session, pinned_key, model, messages_list)
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
