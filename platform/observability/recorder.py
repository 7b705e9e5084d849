"""RequestRecorder: what a request path (chat consumer, REST API) calls once per engine request.

    from observability import track_request

    with track_request(request_id, tenant=tenant.engine_key, profile=profile.name, source="chat",
                       prompt=messages) as rec:
        async for delta in engine.generate(request_id, token_ids, params, tenant=tenant.engine_key):
            rec.on_delta(delta)
            ...  # send the delta to the client

On leaving the block the recorder observes the latency histograms and per-tenant counters
(observability.metrics) and writes one JSON line to the "pagoda.requests" log. How it ended:
the last delta's finish_reason (stop / length / abort); "abort" when the block is left before the
last delta or by cancellation (client gone); "error" when it is left by any other exception (which
is re-raised). Without the `with`, call `rec.finish()` (or `rec.finish(error=exc)`) yourself;
finishing twice is a no-op. `prompt` is kept only when PAGODA_LOG_CONTENT is on.

Times come from the engine's own clock (StreamDelta.metrics: arrival, first_scheduled,
first_token, finished) where present; inter-token latency is measured here, as the reader gets
the tokens.
"""
import asyncio
import time
from typing import Any

from observability import metrics
from observability.request_log import log_content_enabled, log_request


class RequestRecorder:
    """Per-request timing and token counts; thread-compatible (one request, one reader)."""

    def __init__(self, request_id: str, tenant: str | None = None, profile: str | None = None,
                 source: str = "", prompt: Any = None, extra: dict | None = None):
        self.request_id = request_id
        self.tenant = tenant
        self.profile = profile
        self.source = source
        self.extra = dict(extra or {})
        self.log_content = log_content_enabled()
        self.prompt = prompt if self.log_content else None
        self.created_at = time.monotonic()
        self.num_prompt_tokens = 0
        self.num_cached_tokens = 0
        self.num_output_tokens = 0
        self.finish_reason: str | None = None
        self.engine_times: dict = {}
        self._first_token_at: float | None = None
        self._last_token_at: float | None = None
        self._text: list[str] = []
        self._finished = False

    # -- as the request runs -------------------------------------------------------------------------
    def on_delta(self, delta: Any) -> None:
        """Take one StreamDelta (anything with its fields) as the reader receives it."""
        now = time.monotonic()
        num_new = len(delta.token_ids or ())
        if num_new:
            if self._last_token_at is None:
                self._first_token_at = now
            else:
                gap = (now - self._last_token_at) / num_new
                histogram = metrics.INTER_TOKEN_LATENCY.labels(metrics.tenant_label(self.tenant))
                for _ in range(num_new):
                    histogram.observe(gap)
            self._last_token_at = now
        self.num_prompt_tokens = delta.num_prompt_tokens
        self.num_cached_tokens = delta.num_cached_tokens
        self.num_output_tokens = delta.num_output_tokens
        if delta.metrics:
            self.engine_times = delta.metrics
        if self.log_content and delta.text:
            self._text.append(delta.text)
        if delta.finished:
            self.finish_reason = delta.finish_reason

    # -- at the end ----------------------------------------------------------------------------------
    def finish(self, error: BaseException | str | None = None, finish_reason: str | None = None) -> dict | None:
        """Observe the metrics and write the log line, once. Returns the logged fields (None if done before)."""
        if self._finished:
            return None
        self._finished = True
        reason = finish_reason or ("error" if error is not None else self.finish_reason or "abort")
        timings = self._timings()
        self._observe(reason, timings)
        fields = {
            "event": "request_finished",
            "request_id": self.request_id,
            "source": self.source,
            "tenant": self.tenant,
            "profile": self.profile,
            "finish_reason": reason,
            "prompt_tokens": self.num_prompt_tokens,
            "completion_tokens": self.num_output_tokens,
            "cached_tokens": self.num_cached_tokens,
            **timings,
            "num_preemptions": self.engine_times.get("num_preemptions", 0),
            **self.extra,
        }
        if error is not None:
            fields["error"] = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        if self.log_content:
            fields["prompt"] = self.prompt
            fields["completion"] = "".join(self._text)
        log_request(fields)
        return fields

    def _timings(self) -> dict:
        """ttft_s, queue_s, duration_s in seconds (None when unknown), engine clock first."""
        now = time.monotonic()
        t = self.engine_times
        arrival = t.get("arrival") or self.created_at
        first_token = t.get("first_token") or self._first_token_at
        scheduled = t.get("first_scheduled")
        finished = t.get("finished") or now

        def span(start, end):
            return None if start is None or end is None else round(max(0.0, end - start), 6)

        return {"ttft_s": span(arrival, first_token), "queue_s": span(arrival, scheduled),
                "duration_s": span(arrival, finished)}

    def _observe(self, reason: str, timings: dict) -> None:
        tenant = metrics.tenant_label(self.tenant)
        if timings["ttft_s"] is not None:
            metrics.TIME_TO_FIRST_TOKEN.labels(tenant).observe(timings["ttft_s"])
        if timings["queue_s"] is not None:
            metrics.REQUEST_QUEUE_TIME.labels(tenant).observe(timings["queue_s"])
        metrics.E2E_REQUEST_LATENCY.labels(tenant).observe(timings["duration_s"])
        metrics.REQUESTS_FINISHED.labels(tenant, self.source, reason).inc()
        metrics.TENANT_PROMPT_TOKENS.labels(tenant).inc(self.num_prompt_tokens)
        metrics.TENANT_CACHED_PROMPT_TOKENS.labels(tenant).inc(self.num_cached_tokens)
        metrics.TENANT_GENERATION_TOKENS.labels(tenant).inc(self.num_output_tokens)

    # -- as a context manager ------------------------------------------------------------------------
    def __enter__(self) -> "RequestRecorder":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is None:
            self.finish()
        elif isinstance(exc, (asyncio.CancelledError, GeneratorExit, KeyboardInterrupt)):
            self.finish(finish_reason="abort")
        else:
            self.finish(error=exc)
        return False  # never swallow the exception


def track_request(request_id: str, tenant: str | None = None, profile: str | None = None, source: str = "",
                  prompt: Any = None, extra: dict | None = None) -> RequestRecorder:
    """A RequestRecorder for one engine request (see the module docstring).

    tenant: the tenant's engine key (slug) or None; profile: the sampling profile's name; source:
    "chat" | "api" | ...; prompt: messages or text, logged only with PAGODA_LOG_CONTENT; extra: more
    JSON-serialisable log fields (a conversation id, an API key prefix; never content).
    """
    return RequestRecorder(request_id, tenant, profile, source, prompt, extra)
