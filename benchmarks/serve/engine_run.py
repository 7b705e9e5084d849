"""The offline engine on the server's workloads, in its own process (the server has stopped by then,
so they never share the device):

    python -m benchmarks.serve.engine_run SPEC.json OUT.json

SPEC: {"model", "device", "engine_config", "output_len", "workloads": [{"name", "prompts": [token ids]
or [[messages]], "concurrency"}], "probe": {"system", "questions", "cold_systems", "num_background",
"background_prompts", "background_output_len"} or null}. OUT: {"workloads": {name: stats.summarize(...),
plus "prompt_tokens": per prompt}, "probe": {...}}.

Each workload runs closed loop, as the server's clients do: `concurrency` requests in the engine, the
next added as one finishes; a request's TTFT is from add_request to the end of the step that gave its
first token. Chat prompts are encoded as the API encodes them (the model's chat template, no system
turn of a tenant), so both sides serve the same token ids.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from collections import deque

from inference import EngineConfig, LLMEngine, SamplingParams

from benchmarks.workload import last_step_decode_only

from .clients import RequestResult
from .stats import summarize


def encode_chat(engine: LLMEngine, messages: list[dict], add_generation_prompt: bool = True) -> list[int]:
    """What the server's AsyncLLM.encode_chat gives: the chat template rendered, then tokenized."""
    text = engine.tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                                tokenize=False)
    return engine.tokenizer.encode(text, add_special_tokens=False)


def prompt_ids(engine: LLMEngine, prompt) -> list[int]:
    return encode_chat(engine, prompt) if prompt and isinstance(prompt[0], dict) else list(prompt)


def closed_loop(engine: LLMEngine, name: str, prompts: list[list[int]], output_len: int,
                concurrency: int, tenant: str = "bench") -> tuple[list[RequestResult], float]:
    params = SamplingParams(temperature=0, max_tokens=output_len, ignore_eos=True)
    pending = deque(range(len(prompts)))
    results: list[RequestResult | None] = [None] * len(prompts)
    in_flight: dict[str, tuple[int, RequestResult]] = {}

    def admit(now: float) -> None:
        while pending and len(in_flight) < concurrency:
            i = pending.popleft()
            rid = f"{name}-{i}"
            engine.add_request(rid, prompts[i], params, tenant)
            in_flight[rid] = (i, RequestResult(ok=False, sent_at=now, prompt_tokens=len(prompts[i])))

    start = time.perf_counter()
    admit(start)
    while in_flight:
        deltas = engine.step()
        now = time.perf_counter()
        for d in deltas:
            if d.request_id not in in_flight:
                continue
            i, r = in_flight[d.request_id]
            if d.token_ids:
                r.chunk_times.append(now)
                r.output_tokens += len(d.token_ids)
            if d.finished:
                del in_flight[d.request_id]
                r.cached_tokens = d.num_cached_tokens
                if d.error or not r.chunk_times:
                    r.error = d.error or "no tokens"
                else:
                    r.ok, r.ttft, r.e2e = True, r.chunk_times[0] - r.sent_at, now - r.sent_at
                results[i] = r
        admit(now)
    return results, time.perf_counter() - start


def first_token(engine: LLMEngine, rid: str, ids: list[int], tenant: str, background=None) -> tuple[float, int]:
    """Seconds from add_request to the step that gave this request's first token, and its cached tokens."""
    t0 = time.perf_counter()
    engine.add_request(rid, ids, SamplingParams(temperature=0, max_tokens=1, ignore_eos=True), tenant)
    while True:
        deltas = engine.step()
        now = time.perf_counter()
        for d in deltas:
            if d.request_id == rid and d.finished:
                return now - t0, d.num_cached_tokens
            if background is not None and d.finished:
                background(d.request_id)


def pin(engine: LLMEngine, key: str, ids: list[int], tenant: str) -> None:
    done: list = []
    engine.add_pin(key, ids, tenant, done.append)
    while not done:
        engine.step()
    if isinstance(done[0], Exception):
        raise done[0]


def probe(engine: LLMEngine, spec: dict) -> dict:
    """Pinned vs cold TTFT on the API's token ids: idle, then beside `num_background` decoding streams."""
    system, questions = spec["system"], spec["questions"]
    pin(engine, "tenant:pinned", encode_chat(engine, [{"role": "system", "content": system}], False), "pinned")

    def pinned_ids(q: str) -> list[int]:
        return encode_chat(engine, [{"role": "system", "content": system}, {"role": "user", "content": q}])

    first_token(engine, "probe-warm", pinned_ids("warm up " + questions[0]), "pinned")
    pinned = [first_token(engine, f"probe-pinned-{i}", pinned_ids(q), "pinned") for i, q in enumerate(questions)]
    cold = [first_token(engine, f"probe-cold-{i}", encode_chat(engine, [
        {"role": "system", "content": c}, {"role": "user", "content": q}]), "bench")
        for i, (c, q) in enumerate(zip(spec["cold_systems"], questions))]
    busy = _busy_pinned(engine, spec, pinned_ids) if spec.get("num_background") else []
    out = {"pinned_ttft_ms": 1e3 * statistics.median(t for t, _ in pinned),
           "cold_ttft_ms": 1e3 * statistics.median(t for t, _ in cold),
           "pinned_cached_tokens": statistics.median(c for _, c in pinned),
           "cold_cached_tokens": statistics.median(c for _, c in cold),
           "prompt_tokens": len(pinned_ids(questions[0])), "num_repeats": len(questions)}
    out["cold_over_pinned"] = out["cold_ttft_ms"] / out["pinned_ttft_ms"]
    if busy:
        out["busy_pinned_ttft_ms"] = 1e3 * statistics.median(busy)
        out["busy_over_idle_pinned"] = out["busy_pinned_ttft_ms"] / out["pinned_ttft_ms"]
        out["num_background"] = spec["num_background"]
    return out


def _busy_pinned(engine: LLMEngine, spec: dict, pinned_ids) -> list[float]:
    params = SamplingParams(temperature=0, max_tokens=spec["background_output_len"], ignore_eos=True)
    prompts = spec["background_prompts"]
    counter = iter(range(10**9))

    def add_background(_finished_id: str | None = None) -> None:
        n = next(counter)
        engine.add_request(f"probe-bg-{n}", prompts[n % len(prompts)], params, "bench")

    for _ in range(spec["num_background"]):
        add_background()
    traced, engine.trace = engine.trace, []
    for _ in range(3):  # through the background's prefill, into its decode
        engine.step()
    while not last_step_decode_only(engine):
        engine.step()
    engine.trace = traced
    times = [first_token(engine, f"probe-busy-{i}", pinned_ids(q), "pinned", add_background)[0]
             for i, q in enumerate(spec["questions"])]
    for rid in list(engine.output_processor.requests):
        if rid.startswith("probe-bg-"):
            engine.abort(rid)
    return times


def main(argv: list[str]) -> int:
    spec_path, out_path = argv
    with open(spec_path) as f:
        spec = json.load(f)
    config = EngineConfig(model=spec["model"], device=spec["device"], **spec.get("engine_config", {}))
    t0 = time.perf_counter()
    engine = LLMEngine(config, progress=False)
    print(f"  offline engine ready in {time.perf_counter() - t0:.1f}s ({engine.runner.num_blocks} KV blocks)",
          flush=True)
    out: dict = {"workloads": {}, "probe": None}
    output_len = spec["output_len"]
    warm = [prompt_ids(engine, p) for p in spec["workloads"][0]["prompts"][:2]] if spec["workloads"] else []
    if warm:
        closed_loop(engine, "warmup", warm, min(8, output_len), 2)
    for w in spec["workloads"]:
        prompts = [prompt_ids(engine, p) for p in w["prompts"]]
        results, seconds = closed_loop(engine, w["name"], prompts, output_len, w["concurrency"])
        summary = summarize(results, seconds)
        summary["prompt_tokens_each"] = [len(p) for p in prompts]
        out["workloads"][w["name"]] = summary
        print(f"  engine {w['name']}: {summary['output_throughput']:.1f} tok/s", flush=True)
    if spec.get("probe"):
        out["probe"] = probe(engine, spec["probe"])
    engine.shutdown()
    with open(out_path, "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
