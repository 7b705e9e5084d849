"""DatabaseQueueMiddleware: at most PAGODA_DB_MAX_CONCURRENT_REQUESTS page requests run at once; the rest
wait their turn, first come first served, up to PAGODA_DB_QUEUE_TIMEOUT_SECONDS, then get the 503 of
pagoda.unavailable.

Why: under ASGI Django runs each request's synchronous part in a thread of its own, with a database
connection of its own, held until the request ends. A burst of 256 logins is 256 threads, each holding a
connection while it hashes its password (0.3 s of CPU each, tens of seconds when 256 share two cores):
PostgreSQL refuses connections past max_connections (100), a pool of 10 times out the other 246, and on
SQLite 256 writers polling for its one write lock starve each other past any busy timeout. The CPU
bounds a burst anyway; admitted N at a time it takes as long in all and nobody fails.

A request's connection is closed (given back to the pool) before its slot goes to the next one, so
page requests hold at most N connections. Not queued: /v1/ (async views that hold a connection only
for the length of each call, pagoda.db.db_call, and whose generations must not hold a slot), static
files, /health and /metrics (probes answer even when the database is slow). Under WSGI (Django's test
client) requests pass straight through: a WSGI server bounds its threads itself.
"""
from __future__ import annotations

import asyncio
import logging

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings

from pagoda.db import close_connections
from pagoda.unavailable import unavailable_response

logger = logging.getLogger(__name__)

_UNQUEUED_PREFIXES = ("/v1/", "/static/", "/health", "/metrics")


class DatabaseQueueMiddleware:
    """Admission of page requests to the database, N at a time. Sync and async (sync: a pass-through)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)
        self._slots: asyncio.Semaphore | None = None  # made on first use, on the server's event loop

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        return self.get_response(request)

    async def _acall(self, request):
        if request.path.startswith(_UNQUEUED_PREFIXES):
            return await self.get_response(request)
        if self._slots is None:
            self._slots = asyncio.Semaphore(settings.PAGODA_DB_MAX_CONCURRENT_REQUESTS)
        try:
            await asyncio.wait_for(self._slots.acquire(), settings.PAGODA_DB_QUEUE_TIMEOUT_SECONDS)
        except TimeoutError:
            logger.warning("%s %s waited %.0f s for a database slot: 503", request.method, request.path,
                           settings.PAGODA_DB_QUEUE_TIMEOUT_SECONDS)
            return unavailable_response(request)
        try:
            response = await self.get_response(request)
            # In the request's own thread (its ThreadSensitiveContext), where its connection lives.
            await sync_to_async(close_connections)()
            return response
        finally:
            self._slots.release()
