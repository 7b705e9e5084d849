"""Prometheus metrics of this process, in vLLM's spirit with the `pagoda_` prefix.

Two kinds of numbers live in one registry, REGISTRY (not prometheus_client's global one, so nothing
else registers into it by accident):

* Engine numbers, read from `engine.stats()` at scrape time by EngineCollector (no background
  thread): requests running / waiting, KV blocks, prefix-cache tokens, preemptions, token totals.
  Counters come from the engine's own totals, so they restart at 0 with a new engine (Prometheus
  treats that as a counter reset).
* Per-request latencies and per-tenant token counts, observed by the request paths through
  `observability.track_request` (see recorder.py): the histograms below.

The `tenant` label is the tenant's engine key (its slug; NO_TENANT for requests without one): one
series per tenant, which stays small for an on-prem deployment. Profiles and request ids go to the
request log, never to labels. One process, one registry: each server process serves its own
/metrics (the engine core is its child process and reports through it), so no multiprocess mode is needed.
"""
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from observability.history import engine_history

NO_TENANT = "(none)"  # label of requests without a tenant; never a valid slug

REGISTRY = CollectorRegistry()

_TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
TIME_TO_FIRST_TOKEN = Histogram(
    "pagoda_time_to_first_token_seconds",
    "Time from the server's arrival of a request (HTTP request, WebSocket frame) to its first token going out.",
    ["tenant"], registry=REGISTRY, buckets=_TTFT_BUCKETS,
)
ENGINE_TIME_TO_FIRST_TOKEN = Histogram(
    "pagoda_engine_time_to_first_token_seconds",
    "Time from the engine's arrival of a request to its first generated token (queue + prefill).",
    ["tenant"], registry=REGISTRY, buckets=_TTFT_BUCKETS,
)
REQUEST_PREFILL_TIME = Histogram(
    "pagoda_request_prefill_time_seconds",
    "Time from a request's first admission by the scheduler to its first generated token.",
    ["tenant"], registry=REGISTRY, buckets=_TTFT_BUCKETS,
)
INTER_TOKEN_LATENCY = Histogram(
    "pagoda_inter_token_latency_seconds",
    "Time between two generated tokens of a request, as its reader receives them (one per token).",
    ["tenant"], registry=REGISTRY,
    buckets=(0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
             1.0, 2.5),
)
E2E_REQUEST_LATENCY = Histogram(
    "pagoda_e2e_request_latency_seconds",
    "Time from the server's arrival of a request to its end (finished, aborted or failed).",
    ["tenant"], registry=REGISTRY,
    buckets=(0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 120.0, 300.0, 600.0),
)
REQUEST_QUEUE_TIME = Histogram(
    "pagoda_request_queue_time_seconds",
    "Time a request waited before the scheduler first admitted it.",
    ["tenant"], registry=REGISTRY,
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
)
REQUESTS_FINISHED = Counter(
    "pagoda_requests_finished",
    "Requests that ended, by how: stop, length, abort (client left) or error.",
    ["tenant", "source", "finish_reason"], registry=REGISTRY,
)
TENANT_PROMPT_TOKENS = Counter(
    "pagoda_tenant_prompt_tokens", "Prompt tokens of finished requests.", ["tenant"], registry=REGISTRY)
TENANT_CACHED_PROMPT_TOKENS = Counter(
    "pagoda_tenant_cached_prompt_tokens", "Prompt tokens of finished requests served by the prefix cache.",
    ["tenant"], registry=REGISTRY)
TENANT_GENERATION_TOKENS = Counter(
    "pagoda_tenant_generation_tokens", "Generated tokens of finished requests.", ["tenant"], registry=REGISTRY)


def tenant_label(tenant: str | None) -> str:
    return tenant if tenant else NO_TENANT


def kv_usage(stats: dict) -> float:
    """Share of KV blocks in use, 0..1 (vLLM's kv_cache_usage_perc is a fraction too)."""
    total = stats.get("num_blocks_total") or 0
    return (stats.get("num_blocks_used") or 0) / total if total else 0.0


# (metric name, stats key, help): counters and gauges read straight from engine.stats().
_ENGINE_GAUGES = (
    ("pagoda_num_requests_running", "num_running", "Requests in the running batch."),
    ("pagoda_num_requests_waiting", "num_waiting", "Requests waiting to be admitted (preempted ones included)."),
    ("pagoda_kv_cache_blocks_total", "num_blocks_total", "KV-cache blocks of the pool."),
    ("pagoda_kv_cache_blocks_used", "num_blocks_used", "KV-cache blocks held by requests or pins."),
    ("pagoda_kv_cache_blocks_cached", "num_blocks_cached", "KV-cache blocks holding reusable prefixes (used or free)."),
    ("pagoda_kv_cache_blocks_pinned", "num_blocks_pinned", "KV-cache blocks held by pinned system prompts."),
    ("pagoda_kv_cache_block_size_tokens", "block_size", "Tokens per KV-cache block."),
)
_ENGINE_COUNTERS = (
    ("pagoda_prefix_cache_queries", "prefix_cache_queries", "Prompt tokens looked up in the prefix cache."),
    ("pagoda_prefix_cache_hits", "prefix_cache_hits", "Prompt tokens found in the prefix cache."),
    ("pagoda_num_preemptions", "num_preemptions", "Requests preempted (sent back to waiting) for lack of blocks."),
    ("pagoda_prompt_tokens", "prompt_tokens_total", "Prompt tokens computed (prefill), prefix hits excluded."),
    ("pagoda_generation_tokens", "generation_tokens_total", "Tokens generated."),
    ("pagoda_kv_cache_evictions", "num_evictions", "Cached blocks evicted to be reused."),
    ("pagoda_engine_steps", "num_steps", "Engine steps run."),
)


class EngineCollector(Collector):
    """Reads the process's engine (engine_runtime) at each scrape; also feeds the console's history."""

    def describe(self) -> list[Metric]:
        return []  # names depend on whether an engine runs; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        import engine_runtime  # here, not at import: settings load this module's package early

        status = engine_runtime.status()
        yield GaugeMetricFamily("pagoda_engine_up", "1 when the engine is ready and its loop alive, else 0.",
                                value=1.0 if status["state"] == "ready" and status["alive"] else 0.0)
        yield InfoMetricFamily("pagoda_engine", "The engine's model and state.",
                               value={"model": str(status["model"] or ""), "state": status["state"]})
        engine = engine_runtime.peek()
        if engine is None:
            return
        stats = {**engine.stats(), "max_model_len": status["max_model_len"]}
        engine_history.record(stats)
        yield from _engine_families(stats)


def _engine_families(stats: dict) -> Iterator[Metric]:
    for name, key, doc in _ENGINE_GAUGES:
        if stats.get(key) is not None:
            yield GaugeMetricFamily(name, doc, value=stats[key])
    yield GaugeMetricFamily("pagoda_kv_cache_usage_perc", "KV-cache usage, 0..1 (1 means every block is used).",
                            value=kv_usage(stats))
    if stats.get("max_model_len") is not None:
        yield GaugeMetricFamily("pagoda_max_model_len", "Context length in tokens.", value=stats["max_model_len"])
    for name, key, doc in _ENGINE_COUNTERS:
        if stats.get(key) is not None:
            yield CounterMetricFamily(name, doc, value=stats[key])
    per_tenant = GaugeMetricFamily("pagoda_tenant_kv_cache_blocks", "KV-cache blocks of a tenant, by state.",
                                   labels=["tenant", "state"])
    for tenant, row in sorted((stats.get("per_tenant") or {}).items()):
        for state in ("used", "cached", "pinned"):
            per_tenant.add_metric([tenant_label(tenant), state], row.get(f"num_blocks_{state}", 0))
    yield per_tenant


REGISTRY.register(EngineCollector())


def exposition(accept: str = "") -> tuple[bytes, str]:
    """(body, content type) of REGISTRY: the Prometheus text format, or OpenMetrics when Accept asks for it."""
    encoder, content_type = choose_encoder(accept)
    return encoder(REGISTRY), content_type
