"""ApiCall: the usage record of one /v1 call, filled in as the call goes and written once when it ends."""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field


from api import ratelimit, services
from api.errors import ApiError
from api.generation import RunGroup
from api.models import ApiKey
from governance import ledger
from observability.arrival import request_arrival
from pagoda import ttl_cache
from pagoda.db import db_call, is_unavailable
from tenants.models import SamplingProfile

logger = logging.getLogger(__name__)

STATUS_CLIENT_CLOSED = 499  # nginx's "client closed request": the caller left before the answer ended


def new_request_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


@dataclass
class ApiCall:
    """Who called what, and how it ended. `finish()` writes the ApiUsage row and counts the
    completion's tokens against the key's tpm limit; it runs once, even if called again."""

    key: ApiKey
    endpoint: str  # chat.completions | completions | models
    model: str = ""
    stream: bool = False
    request_id: str = ""
    profile: SamplingProfile | None = None
    status_code: int = 200
    error_code: str = ""
    run: RunGroup | None = None  # the engine requests of its choices
    started_at: float = field(default_factory=request_arrival)  # when the HTTP request reached the server
    handed_off: bool = False  # a streaming response owns the rest of the call (and its finish)
    _finished: bool = False

    def fail(self, error: ApiError) -> None:
        self.status_code, self.error_code = error.status, error.code or error.type

    def disconnected(self) -> None:
        self.status_code, self.error_code = STATUS_CLIENT_CLOSED, "client_disconnected"

    async def finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        # Shielded: a second cancellation (the server closing the connection) must not lose the record.
        await asyncio.shield(self._write())

    async def _write(self) -> None:
        run = self.run if self.run is not None and self.run.admitted else None  # tokens only if it ran
        try:
            if run is not None:
                await ratelimit.add_tokens(self.key, run.num_output_tokens)
            usage = await db_call(services.record_api_usage)(
                self.key,
                endpoint=self.endpoint,
                status_code=self.status_code,
                model=self.model.replace("\x00", "\ufffd"),  # PostgreSQL stores no NUL
                profile=self.profile,
                request_id=self.request_id,
                stream=self.stream,
                error_code=self.error_code,
                finish_reason=(run.finish_reason or "") if run else "",
                num_prompt_tokens=run.num_prompt_tokens if run else 0,
                num_cached_tokens=run.num_cached_tokens if run else 0,
                num_output_tokens=run.num_output_tokens if run else 0,
                latency_ms=round((time.monotonic() - self.started_at) * 1000),
                time_to_first_token_ms=(round((run.first_token_at - self.started_at) * 1000)
                                        if run and run.first_token_at is not None else None),
            )
            await db_call(ledger.record_api_call)(usage, self.key)  # governance: the ledger row, releasing the reservation
        except Exception as exc:  # a lost usage row must not turn a served answer into an error
            logger.exception("could not record API usage of %s", self.request_id or self.endpoint)
            if is_unavailable(exc):
                # The database is away: later calls must read it (and get 503) rather than be served
                # from the cache with no usage row, so the cache is emptied at the first lost row.
                ttl_cache.clear_all()
