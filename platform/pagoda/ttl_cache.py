"""What an API call reads on every call (its key, the tenant's profile and system prompt, whether the
tenant has API budgets), kept per process for a few seconds, so that a call in steady state reaches
the engine without a database round trip.

    KEYS = TTLCache("api keys")
    key = await KEYS.aget(hashed, lambda: load_key(hashed))   # loads in a worker thread on a miss

Bounds: a change made in this process (a model saved or deleted, a prompt re-pinned) clears every
cache at once, through the receivers the apps connect (api.apps) and tenants.pin_events; a change
made in another process (another web process, the admin of another replica, a management command) is
seen within settings.PAGODA_API_CACHE_SECONDS, or at once when its pin announcement arrives over
Redis. PAGODA_API_CACHE_SECONDS=0 turns caching off. A load that started before a clear is not
stored (a generation counter), so a clear is never undone by a slow reader.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_delete, post_save

from pagoda.db import db_call

_MISSING = object()
_caches: list["TTLCache"] = []


class TTLCache:
    """Entries expire `ttl` seconds after they were loaded (default settings.PAGODA_API_CACHE_SECONDS,
    read at each store); thread-safe; at most `max_entries` (then the oldest are dropped)."""

    def __init__(self, name: str, ttl: float | None = None, max_entries: int = 10_000,
                 clock: Callable[[], float] = time.monotonic):
        self.name = name
        self.ttl = ttl
        self.max_entries = max_entries
        self.clock = clock
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[float, Any]] = {}
        self._generation = 0
        _caches.append(self)

    def _ttl(self) -> float:
        return self.ttl if self.ttl is not None else settings.PAGODA_API_CACHE_SECONDS

    def get(self, key: Hashable) -> Any:
        """The cached value, or _MISSING (see `missing`); always _MISSING while the TTL is 0 (caching off)."""
        if self._ttl() <= 0:
            return _MISSING
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return _MISSING
            if entry[0] <= self.clock():
                del self._entries[key]
                return _MISSING
            return entry[1]

    def generation(self) -> int:
        return self._generation

    def put(self, key: Hashable, value: Any, generation: int) -> None:
        """Store `value`, unless the cache was cleared since `generation` was read (before loading it)."""
        ttl = self._ttl()
        if ttl <= 0:
            return
        with self._lock:
            if generation != self._generation:
                return
            if len(self._entries) >= self.max_entries:
                for old in list(self._entries)[: max(1, self.max_entries // 10)]:
                    del self._entries[old]
            self._entries[key] = (self.clock() + ttl, value)

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries.clear()

    def load(self, key: Hashable, load: Callable[[], Any]) -> Any:
        """The cached value, or `load()` stored (sync code)."""
        value = self.get(key)
        if value is _MISSING:
            generation = self.generation()
            value = load()
            self.put(key, value, generation)
        return value

    async def aget(self, key: Hashable, load: Callable[[], Any]) -> Any:
        """The cached value, or `load()` run as a database call in a worker thread and stored."""
        value = self.get(key)
        if value is _MISSING:
            generation = self.generation()
            value = await db_call(load)()
            self.put(key, value, generation)
        return value


def missing(value: Any) -> bool:
    return value is _MISSING


def clear_all(**_: Any) -> None:
    """Forget every cached entry of this process (also a signal receiver: it takes any keywords)."""
    for cache in _caches:
        cache.clear()


def _on_change(using: str | None = None, **_: Any) -> None:
    # Now, and again when the transaction commits: a call that reads between the two would otherwise
    # store what the transaction is about to replace.
    clear_all()
    transaction.on_commit(clear_all, using=using)


def clear_on_change(*models: type) -> None:
    """Clear every cache whenever a row of `models` is saved or deleted in this process (apps' ready())."""
    for model in models:
        for signal in (post_save, post_delete):
            signal.connect(_on_change, sender=model, dispatch_uid=f"pagoda.ttl_cache:{signal}:{model._meta.label}",
                           weak=False)
