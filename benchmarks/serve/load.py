"""Driving requests: closed loop (at most `max_concurrency` in flight) and/or Poisson arrivals
(`request_rate` per second; inf: all at once), as `vllm bench serve` does."""
from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable

from .clients import RequestResult


async def run_load(send: Callable[[int], Awaitable[RequestResult]], num_requests: int,
                   max_concurrency: int | None, request_rate: float = math.inf,
                   seed: int = 0) -> tuple[list[RequestResult], float]:
    """Send requests 0..num_requests-1; returns their results in that order and the run's seconds."""
    rng = random.Random(seed)
    limit = asyncio.Semaphore(max_concurrency or num_requests)

    async def one(i: int) -> RequestResult:
        async with limit:
            return await send(i)

    start = time.perf_counter()
    tasks = []
    for i in range(num_requests):
        tasks.append(asyncio.create_task(one(i)))
        if request_rate != math.inf and i < num_requests - 1:
            await asyncio.sleep(rng.expovariate(request_rate))
    results = await asyncio.gather(*tasks)
    return list(results), time.perf_counter() - start
