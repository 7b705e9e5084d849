"""Observability: /health, Prometheus /metrics, the console's engine history, and request logs.

For the request paths (chat consumer, REST API), one call per engine request:

    from observability import track_request

    with track_request(request_id, tenant=tenant.engine_key, profile=profile.name, source="chat",
                       prompt=messages) as rec:
        async for delta in engine.generate(request_id, token_ids, params, tenant=tenant.engine_key):
            rec.on_delta(delta)
            ...

That observes pagoda_time_to_first_token_seconds and pagoda_e2e_request_latency_seconds (from the
server's arrival of the request: observability.arrival), pagoda_engine_time_to_first_token_seconds
split into pagoda_request_queue_time_seconds and pagoda_request_prefill_time_seconds (the engine's
clock), pagoda_inter_token_latency_seconds (label `tenant`),
pagoda_requests_finished_total and the per-tenant token counters, and writes one JSON line to the
"pagoda.requests" logger (no prompt or completion text unless PAGODA_LOG_CONTENT=true). Details in
observability.recorder. Engine-wide numbers (running / waiting, KV blocks, prefix cache, token
totals) are read from the engine at scrape time; nothing else to call.

Modules: metrics (the registry and collectors), recorder (per request), arrival (when a request
reached the server), request_log (the JSON log),
history (ring buffer behind the console chart), health, access (who may scrape), views, urls.
"""
from observability.recorder import RequestRecorder, track_request

__all__ = ["RequestRecorder", "track_request"]
