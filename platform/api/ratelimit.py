"""Per-key rate limits (requests and tokens per minute) behind one small interface, two backends.

A limiter keeps, per counter key, a sliding-window log of (time, cost) entries:

    retry_after = await limiter.hit(key, limit, cost)   # 0.0: admitted and counted; else seconds to wait
    await limiter.add(key, cost)                        # count without checking (tokens known afterwards)

MemoryRateLimiter counts in this process (one server); RedisRateLimiter keeps the log in a Redis
sorted set, updated by one Lua script (atomic, Redis's own clock), so several replicas share a limit.
get_limiter() picks Redis when settings.PAGODA_REDIS_URL is set.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
import uuid
import weakref
from typing import Callable, Protocol

from django.conf import settings

from api.errors import rate_limited

logger = logging.getLogger(__name__)

WINDOW_S = 60.0


class RateLimiter(Protocol):
    async def hit(self, key: str, limit: int, cost: int = 1) -> float:
        """Count `cost` against `key` if the window's total stays within `limit`: returns 0.0.
        Otherwise counts nothing and returns the seconds until enough of the window has expired."""

    async def add(self, key: str, cost: int) -> None:
        """Count `cost` against `key` unconditionally."""


def _wait_for(entries: list[tuple[float, int]], now: float, window: float, limit: int, cost: int) -> float:
    """Seconds until the oldest entries have expired enough for `cost` to fit (entries oldest first)."""
    need = sum(c for _, c in entries) + cost - limit
    freed = 0
    for at, c in entries:
        freed += c
        if freed >= need:
            return max(at + window - now, 0.001)
    return window  # cost alone exceeds the limit: it never fits; the caller reports that


class MemoryRateLimiter:
    """Sliding-window counters in this process's memory (thread-safe)."""

    def __init__(self, window: float = WINDOW_S, clock: Callable[[], float] = time.monotonic):
        self.window = window
        self.clock = clock
        self._lock = threading.Lock()
        self._logs: dict[str, collections.deque[tuple[float, int]]] = collections.defaultdict(collections.deque)

    def _expire(self, key: str, now: float) -> collections.deque[tuple[float, int]]:
        log = self._logs[key]
        while log and log[0][0] <= now - self.window:
            log.popleft()
        return log

    async def hit(self, key: str, limit: int, cost: int = 1) -> float:
        with self._lock:
            now = self.clock()
            log = self._expire(key, now)
            if sum(c for _, c in log) + cost > limit:
                return _wait_for(list(log), now, self.window, limit, cost)
            log.append((now, cost))
            return 0.0

    async def add(self, key: str, cost: int) -> None:
        with self._lock:
            now = self.clock()
            self._expire(key, now).append((now, cost))


# KEYS[1]: the sorted set (score: time, member: "<unique id>:<cost>").
# ARGV: window seconds, limit (-1: add without checking), cost, unique id. Returns "0" or the wait, as a
# string (Redis would truncate a Lua number to an integer).
_HIT_SCRIPT = """
local key, window, limit, cost = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
if limit >= 0 then
  local entries = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local used = 0
  for i = 1, #entries, 2 do used = used + tonumber(string.match(entries[i], ':(%d+)$')) end
  if used + cost > limit then
    local need, freed = used + cost - limit, 0
    for i = 1, #entries, 2 do
      freed = freed + tonumber(string.match(entries[i], ':(%d+)$'))
      if freed >= need then return tostring(math.max(tonumber(entries[i + 1]) + window - now, 0.001)) end
    end
    return tostring(window)
  end
end
redis.call('ZADD', key, now, ARGV[4] .. ':' .. cost)
redis.call('PEXPIRE', key, math.ceil(window * 1000))
return '0'
"""


class RedisRateLimiter:
    """Sliding-window counters in Redis, shared by every server process that uses the same Redis.

    A Redis that cannot be reached admits the request (and logs): losing the limit for a while is
    better than refusing every call of every tool.
    """

    def __init__(self, url: str, window: float = WINDOW_S, prefix: str = "pagoda:ratelimit:"):
        self.url = url
        self.window = window
        self.prefix = prefix
        # redis.asyncio connections belong to the event loop that opened them: one client per loop.
        self._clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def _client(self):
        import redis.asyncio

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = redis.asyncio.Redis.from_url(self.url)
        return client

    async def _run(self, key: str, limit: int, cost: int) -> float:
        import redis

        try:
            result = await self._client().eval(_HIT_SCRIPT, 1, self.prefix + key, self.window, limit, cost,
                                               uuid.uuid4().hex)
        except (redis.RedisError, OSError) as exc:
            logger.warning("rate limit not enforced, Redis failed: %s", exc)
            return 0.0
        return float(result)

    async def hit(self, key: str, limit: int, cost: int = 1) -> float:
        return await self._run(key, limit, cost)

    async def add(self, key: str, cost: int) -> None:
        await self._run(key, -1, cost)

    async def aclose(self) -> None:
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()


_limiter: RateLimiter | None = None
_limiter_lock = threading.Lock()


def get_limiter() -> RateLimiter:
    """The process's limiter: Redis-backed when PAGODA_REDIS_URL is set, else in memory."""
    global _limiter
    with _limiter_lock:
        if _limiter is None:
            url = settings.PAGODA_REDIS_URL
            _limiter = RedisRateLimiter(url) if url else MemoryRateLimiter()
        return _limiter


def reset_limiter() -> None:
    """Forget the process's limiter (tests; a settings change)."""
    global _limiter
    with _limiter_lock:
        _limiter = None


# --- the API key limits, as the views apply them ---
def _counter(key, kind: str) -> str:
    # The key's hash, not its id: ids restart in a fresh database, and a shared Redis must not mix them up.
    return f"{key.hashed_key[:32]}:{kind}"


async def check_request(key) -> None:
    """Count one request against the key's rpm_limit; raises a 429 ApiError when the window is full."""
    if key.rpm_limit is None:
        return
    wait = await get_limiter().hit(_counter(key, "requests"), key.rpm_limit)
    if wait:
        raise rate_limited(f"Rate limit reached: {key.rpm_limit} requests per minute for this key. "
                           f"Retry in {wait:.1f} s.", wait)


async def check_tokens(key, num_prompt_tokens: int) -> None:
    """Admit a request of `num_prompt_tokens` under the key's tpm_limit (and count them); else 429.

    The completion's tokens are counted when it ends (add_tokens), so a burst of long answers can
    overshoot the limit once; the next request then waits.
    """
    if key.tpm_limit is None:
        return
    if num_prompt_tokens > key.tpm_limit:
        raise rate_limited(f"Request too large: the prompt has {num_prompt_tokens} tokens; this key may use "
                           f"{key.tpm_limit} tokens per minute.", WINDOW_S, code="tokens_exceeded")
    wait = await get_limiter().hit(_counter(key, "tokens"), key.tpm_limit, num_prompt_tokens)
    if wait:
        raise rate_limited(f"Rate limit reached: {key.tpm_limit} tokens per minute for this key. "
                           f"Retry in {wait:.1f} s.", wait, code="tokens_exceeded")


async def add_tokens(key, num_tokens: int) -> None:
    if key.tpm_limit is not None and num_tokens > 0:
        await get_limiter().add(_counter(key, "tokens"), num_tokens)
