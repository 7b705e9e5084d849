"""What the console's live engine panel shows, read from the running engine (no database)."""
from typing import Any

from django.utils.crypto import salted_hmac

import engine_runtime
from observability.history import engine_history
from observability.metrics import kv_usage
from tenants import pin_events, pinning
from tenants.models import Tenant

STATS_TOKEN_HEADER = "X-Pagoda-Stats-Token"


def stats_token() -> str:
    """A token derived from SECRET_KEY: scripts run with the server's settings can read the engine stats."""
    return salted_hmac("pagoda.console.engine_stats", "v1").hexdigest()


GLOBAL_STATS = (
    "num_running",
    "num_waiting",
    "num_blocks_total",
    "num_blocks_used",
    "num_blocks_cached",
    "num_blocks_pinned",
    "prefix_cache_queries",
    "prefix_cache_hits",
    "num_preemptions",
    "prompt_tokens_total",
    "generation_tokens_total",
)


def engine_stats(engine: Any = None) -> dict:
    """{"engine": status, "stats": {...} or None, "pins": {key: {num_tokens, num_blocks}},
    "history": the last minutes of throughput and KV use (observability.history),
    "pin_listener": this replica's pin-change listener (tenants.pin_events) or None} of the whole engine."""
    engine = engine or engine_runtime.peek()
    data: dict = {"engine": engine_runtime.status(), "stats": None, "pins": {},
                  "pin_listener": pin_events.listener_status()}
    if engine is None:
        data["history"] = engine_history.series()
        return data
    stats = engine.stats()
    engine_history.record(stats)  # a poll is a sample: the chart fills while someone watches
    data["history"] = engine_history.series()
    data["stats"] = {key: stats.get(key) for key in GLOBAL_STATS}
    data["stats"]["kv_usage"] = kv_usage(stats)
    data["stats"]["prefix_cache_hit_rate"] = hit_rate(stats)
    data["per_tenant"] = stats.get("per_tenant", {})
    data["pins"] = {key: {"num_tokens": p.num_tokens, "num_blocks": p.num_blocks} for key, p in engine.pins().items()}
    return data


def hit_rate(row: dict) -> float | None:
    """Prompt tokens served from the prefix cache / prompt tokens looked up; None before any lookup."""
    queried = row.get("prefix_cache_queries") or 0
    return (row.get("prefix_cache_hits") or 0) / queried if queried else None


def tenant_hit_rates(tenants, engine: Any = None) -> dict[int, dict]:
    """{tenant pk: {"hits", "queries", "rate"}} of the running engine (since it started), for the
    tenants given; {} when no engine runs. Each tenant's cache is its own, so these rates differ."""
    engine = engine or engine_runtime.peek()
    if engine is None:
        return {}
    per_tenant = engine.stats().get("per_tenant") or {}
    rates = {}
    for tenant in tenants:
        row = per_tenant.get(tenant.engine_key, {})
        rates[tenant.pk] = {"hits": row.get("prefix_cache_hits", 0), "queries": row.get("prefix_cache_queries", 0),
                            "rate": hit_rate(row)}
    return rates


def tenant_panel(tenant: Tenant) -> dict:
    """The whole engine's load (numbers only) plus this tenant's own share and pin; nothing of other tenants."""
    engine = engine_runtime.peek()
    data = engine_stats(engine)
    data["tenant"] = data.pop("per_tenant", {}).get(tenant.engine_key, {})
    data["tenant"]["prefix_cache_hit_rate"] = hit_rate(data["tenant"])
    data["pins"] = {}  # other tenants' pin keys name them: not shown to a tenant admin
    data["pin"] = pinning.pin_status(tenant, engine)
    return data
