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

Two clocks, both time.monotonic() (one clock for every process of the host, the engine core's too):
- where users feel it: `arrival` is when the request reached the server (the HTTP request, the
  WebSocket frame; given by the edge, else when the recorder was made), and the first token counts
  when the edge receives it to send out. ttft_s and duration_s are on this clock.
- the engine's own (StreamDelta.metrics: arrival, first_scheduled, first_token, finished):
  engine_ttft_s, split into queue_s (waiting for admission) and prefill_s.
Inter-token gaps are kept here as the reader gets the tokens and observed once, at the end, so the
per-token path does no metrics work.
"""
import asyncio
import time
from typing import Any

from observability import metrics
from observability.arrival import request_arrival
from observability.request_log import log_content_enabled, log_request


class RequestRecorder:
    """Per-request timing and token counts; thread-compatible (one request, one reader)."""

    def __init__(self, request_id: str, tenant: str | None = None, profile: str | None = None,
                 source: str = "", prompt: Any = None, extra: dict | None = None, arrival: float | None = None):
        self.request_id = request_id
        self.tenant = tenant
        self.profile = profile
        self.source = source
        self.extra = dict(extra or {})
        self.log_content = log_content_enabled()
        self.prompt = prompt if self.log_content else None
        self.arrival = arrival if arrival is not None else request_arrival()
        self.num_prompt_tokens = 0
        self.num_cached_tokens = 0
        self.num_output_tokens = 0
        self.finish_reason: str | None = None
        self.engine_times: dict = {}
        self._first_token_at: float | None = None
        self._last_token_at: float | None = None
        self._token_gaps: list[float] = []  # per generated token after the first, seconds
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
                self._token_gaps.extend([(now - self._last_token_at) / num_new] * num_new)
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
        """Seconds, None when unknown: ttft_s and duration_s from the server's arrival of the request
        (what the user waits); engine_ttft_s, queue_s and prefill_s on the engine's clock."""
        now = time.monotonic()
        t = self.engine_times

        def span(start, end):
            return None if start is None or end is None else round(max(0.0, end - start), 6)

        return {"ttft_s": span(self.arrival, self._first_token_at), "duration_s": span(self.arrival, now),
                "engine_ttft_s": span(t.get("arrival"), t.get("first_token")),
                "queue_s": span(t.get("arrival"), t.get("first_scheduled")),
                "prefill_s": span(t.get("first_scheduled"), t.get("first_token"))}

    def _observe(self, reason: str, timings: dict) -> None:
        tenant = metrics.tenant_label(self.tenant)
        for histogram, key in ((metrics.TIME_TO_FIRST_TOKEN, "ttft_s"),
                               (metrics.ENGINE_TIME_TO_FIRST_TOKEN, "engine_ttft_s"),
                               (metrics.REQUEST_QUEUE_TIME, "queue_s"),
                               (metrics.REQUEST_PREFILL_TIME, "prefill_s")):
            if timings[key] is not None:
                histogram.labels(tenant).observe(timings[key])
        if self._token_gaps:
            itl = metrics.INTER_TOKEN_LATENCY.labels(tenant)
            for gap in self._token_gaps:
                itl.observe(gap)
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
                  prompt: Any = None, extra: dict | None = None, arrival: float | None = None) -> RequestRecorder:
    """A RequestRecorder for one engine request (see the module docstring).

    tenant: the tenant's engine key (slug) or None; profile: the sampling profile's name; source:
    "chat" | "api" | ...; prompt: messages or text, logged only with PAGODA_LOG_CONTENT; extra: more
    JSON-serialisable log fields (a conversation id, an API key prefix; never content); arrival: when
    the request reached the server (time.monotonic()), the start of what the user waits; by default
    the current request's (observability.arrival), else now.
    """
    return RequestRecorder(request_id, tenant, profile, source, prompt, extra, arrival)
