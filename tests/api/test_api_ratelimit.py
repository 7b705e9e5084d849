"""Per-key rate limits: both limiter backends (memory; Redis, against the real server) and the 429s."""
import asyncio
import os
import uuid

import pytest

from api import ratelimit
from api.ratelimit import MemoryRateLimiter, RedisRateLimiter
from api.models import ApiUsage

REDIS_URL = os.environ.get("PAGODA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
CHAT = {"model": "terse", "messages": [{"role": "user", "content": "Hi"}]}


def _redis_reachable() -> bool:
    import redis

    try:
        return redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except (redis.RedisError, OSError):
        return False


needs_redis = pytest.mark.skipif(not _redis_reachable(), reason=f"no Redis at {REDIS_URL}")


@pytest.fixture(params=["memory", pytest.param("redis", marks=needs_redis)])
def make_limiter(request):
    """make_limiter(window) -> a limiter of the parametrized backend (Redis keys unique to the test)."""
    prefix = f"pagoda-test:{uuid.uuid4().hex}:"

    def make(window: float):
        return MemoryRateLimiter(window) if request.param == "memory" else RedisRateLimiter(REDIS_URL, window, prefix)

    return make


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_memory_window_slides():
    clock = FakeClock()
    limiter = MemoryRateLimiter(window=60, clock=clock)
    assert [await limiter.hit("k", 3) for _ in range(3)] == [0.0, 0.0, 0.0]
    clock.now += 10
    assert await limiter.hit("k", 3) == pytest.approx(50)  # the first hit expires 60 s after it was made
    assert await limiter.hit("other", 3) == 0.0  # counters are per key
    clock.now += 50
    assert await limiter.hit("k", 3) == 0.0


async def test_memory_costs_and_unconditional_adds():
    clock = FakeClock()
    limiter = MemoryRateLimiter(window=60, clock=clock)
    assert await limiter.hit("t", 100, 60) == 0.0
    clock.now += 5
    await limiter.add("t", 30)  # 90 used now
    clock.now += 5
    assert await limiter.hit("t", 100, 20) == pytest.approx(50)  # only when the 60 expire is there room
    assert await limiter.hit("t", 100, 10) == 0.0
    assert await limiter.hit("t", 100, 101) == 60  # can never fit


async def test_backends_agree_on_limits_and_expiry(make_limiter):
    limiter = make_limiter(window=0.5)
    assert [await limiter.hit("k", 2) for _ in range(2)] == [0.0, 0.0]
    wait = await limiter.hit("k", 2)
    assert 0 < wait <= 0.5
    assert await limiter.hit("k", 5, 3) == 0.0  # a larger limit on the same counter fits
    await asyncio.sleep(0.55)
    assert await limiter.hit("k", 2) == 0.0
    await limiter.add("tokens", 40)
    assert 0 < await limiter.hit("tokens", 50, 20) <= 0.5
    assert await limiter.hit("tokens", 50, 10) == 0.0


@needs_redis
async def test_redis_counts_are_shared_between_replicas():
    prefix = f"pagoda-test:{uuid.uuid4().hex}:"
    replica_a, replica_b = RedisRateLimiter(REDIS_URL, 60, prefix), RedisRateLimiter(REDIS_URL, 60, prefix)
    assert await replica_a.hit("k", 2) == 0.0
    assert await replica_b.hit("k", 2) == 0.0
    assert 59 < await replica_a.hit("k", 2) <= 60
    await replica_a.aclose()
    await replica_b.aclose()


async def test_unreachable_redis_admits_the_request():
    limiter = RedisRateLimiter("redis://127.0.0.1:1/0")
    assert await limiter.hit("k", 1) == 0.0
    assert await limiter.hit("k", 1) == 0.0


def test_backend_follows_the_settings(settings):
    assert isinstance(ratelimit.get_limiter(), MemoryRateLimiter)
    ratelimit.reset_limiter()
    settings.PAGODA_REDIS_URL = REDIS_URL
    assert isinstance(ratelimit.get_limiter(), RedisRateLimiter)


# --- through the API ---
def _assert_429(response, code: str) -> dict:
    assert response.status_code == 429, response.content
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("rate_limit_error", code)
    assert 1 <= int(response["Retry-After"]) <= 60 and int(response["retry-after-ms"]) >= 1
    return error


@pytest.mark.parametrize("backend", ["memory", pytest.param("redis", marks=needs_redis)])
def test_requests_per_minute(api, tenant, make_key, fake_engine, settings, backend):
    if backend == "redis":
        settings.PAGODA_REDIS_URL = REDIS_URL
    _, limited = make_key(tenant, "limited", rpm_limit=2)
    _, unlimited = make_key(tenant, "unlimited")
    assert [api.post("chat/completions", CHAT, limited).status_code for _ in range(2)] == [200, 200]
    assert "2 requests per minute" in _assert_429(api.post("chat/completions", CHAT, limited), "rate_limit_exceeded")["message"]
    assert api.post("chat/completions", CHAT, unlimited).status_code == 200
    assert api.get("models", limited).status_code == 200  # listing models is not limited
    assert ApiUsage.objects.filter(status_code=429, error_code="rate_limit_exceeded").count() == 1


def test_tokens_per_minute(api, tenant, make_key, fake_engine):
    _, key = make_key(tenant, "tpm", tpm_limit=30)
    first = api.post("chat/completions", CHAT, key)  # 19 prompt + 5 completion tokens
    assert first.status_code == 200 and first.json()["usage"]["total_tokens"] == 24
    _assert_429(api.post("chat/completions", CHAT, key), "tokens_exceeded")
    huge = {**CHAT, "messages": [{"role": "user", "content": "x" * 40}]}
    assert "Request too large" in _assert_429(api.post("chat/completions", huge, key), "tokens_exceeded")["message"]
    assert len(fake_engine.requests) == 1
