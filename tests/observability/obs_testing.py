"""Helpers for the observability tests: read a /metrics page, drive a real request with a recorder,
set the session engine aside."""
import uuid

from prometheus_client.parser import text_string_to_metric_families

from observability import track_request


def parse_metrics(text: str) -> dict:
    """Prometheus text -> {(sample name, ((label, value), ...)): value}."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def metric(samples: dict, name: str, **labels) -> float:
    """One sample's value from parse_metrics' dict; 0 when absent (a series not created yet)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def scrape(client) -> dict:
    """GET /metrics with a django.test.AsyncClient (from 127.0.0.1), parsed."""
    response = await client.get("/metrics")
    assert response.status_code == 200, response.content
    return parse_metrics(response.content.decode())


async def run_request(engine, tenant: str | None, text: str, max_tokens: int, on_first_delta=None):
    """One chat request through engine.generate, recorded as the chat/API paths do.

    Returns (recorder, number of prompt tokens). `on_first_delta`: a coroutine function awaited once,
    while the request is still running."""
    from inference import SamplingParams

    request_id = f"obs-{uuid.uuid4().hex[:10]}"
    token_ids = engine.encode_chat([{"role": "user", "content": text}])
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    with track_request(request_id, tenant=tenant, profile="default", source="test", prompt=text) as rec:
        async for delta in engine.generate(request_id, token_ids, params, tenant=tenant):
            rec.on_delta(delta)
            if on_first_delta is not None:
                await on_first_delta()
                on_first_delta = None
    return rec, len(token_ids)


