"""/metrics against the real engine: scrape, run requests, scrape again."""
import pytest
from django.test import AsyncClient
from obs_testing import metric, run_request, scrape

from observability.request_log import FIELDS_ATTR

PROMPT = "Tell me about the history of the pagoda, the tiered tower of East Asia, in a few words. " * 2


@pytest.fixture
def client():
    return AsyncClient()


async def test_counters_and_histograms_go_up_as_requests_run(real_engine, client, request_logs):
    before = await scrape(client)
    during: dict = {}

    async def look():
        during.update(await scrape(client))

    first, num_prompt_1 = await run_request(real_engine, "acme", PROMPT, max_tokens=24, on_first_delta=look)
    second, num_prompt_2 = await run_request(real_engine, "acme", PROMPT, max_tokens=4)  # a prefix hit
    after = await scrape(client)

    def grew(name, **labels):
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert metric(during, "pagoda_num_requests_running") >= 1
    assert metric(after, "pagoda_num_requests_running") == 0
    assert metric(after, "pagoda_engine_up") == 1
    assert grew("pagoda_generation_tokens_total") == 24 + 4
    assert grew("pagoda_prefix_cache_queries_total") == num_prompt_1 + num_prompt_2
    hits = grew("pagoda_prefix_cache_hits_total")
    # The second request reused the first one's blocks (the first may hit blocks of earlier tests: the
    # chat template's default system turn is every prompt's start).
    assert second.num_cached_tokens >= first.num_cached_tokens + real_engine.stats()["block_size"]
    assert hits == first.num_cached_tokens + second.num_cached_tokens
    assert grew("pagoda_prompt_tokens_total") == num_prompt_1 + num_prompt_2 - hits
    total = metric(after, "pagoda_kv_cache_blocks_total")
    assert total > 0 and 0 <= metric(after, "pagoda_kv_cache_usage_perc") <= 1
    assert 0 < metric(during, "pagoda_kv_cache_blocks_used") <= total

    for name in ("pagoda_time_to_first_token_seconds", "pagoda_e2e_request_latency_seconds",
                 "pagoda_request_queue_time_seconds"):
        assert grew(f"{name}_count", tenant="acme") == 2, name
    assert grew("pagoda_e2e_request_latency_seconds_sum", tenant="acme") > grew(
        "pagoda_time_to_first_token_seconds_sum", tenant="acme") > 0
    assert grew("pagoda_inter_token_latency_seconds_count", tenant="acme") == (24 - 1) + (4 - 1)
    assert grew("pagoda_requests_finished_total", tenant="acme", source="test", finish_reason="length") == 2
    assert grew("pagoda_tenant_generation_tokens_total", tenant="acme") == 28
    assert grew("pagoda_tenant_prompt_tokens_total", tenant="acme") == num_prompt_1 + num_prompt_2
    assert grew("pagoda_tenant_cached_prompt_tokens_total", tenant="acme") == hits

    lines = [getattr(r, FIELDS_ATTR) for r in request_logs]
    assert [line["request_id"] for line in lines] == [first.request_id, second.request_id]
    assert lines[0]["completion_tokens"] == 24 and lines[0]["prompt_tokens"] == num_prompt_1
    assert lines[1]["cached_tokens"] == second.num_cached_tokens and lines[1]["finish_reason"] == "length"
    assert 0 < lines[0]["ttft_s"] <= lines[0]["duration_s"]
    assert "prompt" not in lines[0] and "completion" not in lines[0]


async def test_an_abandoned_request_counts_as_aborted(real_engine, client):
    from inference import SamplingParams
    from observability import track_request

    before = await scrape(client)
    token_ids = real_engine.encode_chat([{"role": "user", "content": "Count to one hundred."}])
    stream = real_engine.generate("obs-abandoned", token_ids, SamplingParams(max_tokens=64, ignore_eos=True),
                                  tenant="acme")
    with track_request("obs-abandoned", tenant="acme", source="test") as rec:
        async for delta in stream:
            rec.on_delta(delta)
            break  # the client went away
    await stream.aclose()  # what the consumer's task cancellation does: aborts the engine request
    after = await scrape(client)
    labels = dict(tenant="acme", source="test", finish_reason="abort")
    assert metric(after, "pagoda_requests_finished_total", **labels) - metric(
        before, "pagoda_requests_finished_total", **labels) == 1


async def test_the_rest_api_engine_run_is_recorded(real_engine, client, request_logs):
    from api.generation import EngineRun
    from inference import SamplingParams

    before = await scrape(client)
    token_ids = real_engine.encode_chat([{"role": "user", "content": "Say hi."}])
    run = EngineRun(real_engine, "obs-api-1", token_ids, SamplingParams(max_tokens=3, ignore_eos=True),
                    tenant="acme", profile="default")
    try:
        await run.start()
        await run.collect()
    finally:
        await run.aclose()
    after = await scrape(client)
    labels = dict(tenant="acme", source="api", finish_reason="length")
    assert metric(after, "pagoda_requests_finished_total", **labels) - metric(
        before, "pagoda_requests_finished_total", **labels) == 1
    [line] = [getattr(r, FIELDS_ATTR) for r in request_logs]
    assert (line["request_id"], line["source"], line["profile"]) == ("obs-api-1", "api", "default")
    assert line["completion_tokens"] == 3 and line["prompt_tokens"] == len(token_ids)
