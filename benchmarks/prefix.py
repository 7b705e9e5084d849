"""TTFT of a long system prompt + a short question: cold (nothing cached) vs pinned."""
from __future__ import annotations

import json
import os
import random
import statistics
import tempfile
import time

from inference.engine import LLMEngine
from inference.sampling_params import SamplingParams


def ttft(engine: LLMEngine, rid: str, prompt: list[int], tenant: str, sync=None) -> tuple[float, int]:
    """Seconds from submission to the first token, and the prompt tokens served from the cache."""
    t0 = time.perf_counter()
    engine.add_request(rid, prompt, SamplingParams(temperature=0, max_tokens=1, ignore_eos=True), tenant)
    cached = 0
    while engine.has_unfinished():
        for d in engine.step():
            cached = d.num_cached_tokens
    if sync:
        sync()
    return time.perf_counter() - t0, cached


def pin_and_wait(engine: LLMEngine, key: str, prompt: list[int], tenant: str):
    result = []
    engine.add_pin(key, prompt, tenant, result.append)
    while not result:
        engine.step()
    if isinstance(result[0], Exception):
        raise result[0]
    return result[0]


def run_prefix_bench(engine: LLMEngine, system_len: int, question_len: int, repeats: int, sync=None,
                     seed: int = 0) -> dict:
    """Another `seed` gives other prompts and tenants: a second run must not hit the first one's cache."""
    rng = random.Random(seed)
    vocab = engine.model_args.vocab_size

    def tokens(n):
        return [rng.randrange(100, vocab - 100) for _ in range(n)]

    system = tokens(system_len)
    ttft(engine, "warmup", tokens(system_len + question_len), f"warmup-{seed}", sync)
    cold = [ttft(engine, f"cold{i}", system + tokens(question_len), f"cold-tenant-{seed}-{i}", sync)
            for i in range(repeats)]
    pin = pin_and_wait(engine, "bench-system", system, "bench")
    warm = [ttft(engine, f"pinned{i}", system + tokens(question_len), "bench", sync) for i in range(repeats)]
    engine.unpin("bench-system")
    cold_s, warm_s = statistics.median(t for t, _ in cold), statistics.median(t for t, _ in warm)
    return {
        "system_len": system_len, "question_len": question_len, "repeats": repeats,
        "pinned_tokens": pin.num_tokens,
        "cold_ttft_ms": 1e3 * cold_s, "pinned_ttft_ms": 1e3 * warm_s, "speedup": cold_s / warm_s,
        "cold_cached_tokens": [c for _, c in cold], "pinned_cached_tokens": [c for _, c in warm],
    }


def format_prefix(r: dict) -> str:
    return (f"system prompt {r['system_len']} tokens + question {r['question_len']} tokens, median of "
            f"{r['repeats']}: cold TTFT {r['cold_ttft_ms']:.1f} ms, pinned TTFT {r['pinned_ttft_ms']:.1f} ms "
            f"-> {r['speedup']:.1f}x faster (pinned {r['pinned_tokens']} tokens; cached tokens per pinned "
            f"request {r['pinned_cached_tokens']}, per cold request {r['cold_cached_tokens']})")


def profile_pinned_step(engine: LLMEngine, system_len: int, question_len: int, sync,
                        trace_path: str | None = None) -> str:
    """Where a pinned request's TTFT goes (GPU runs only): torch.profiler over one such request, the
    top ops, and its timeline: host time before the first kernel, the GPU's span, busy time and idle
    gaps inside it, and host time after the last kernel."""
    import torch

    rng = random.Random(1)
    vocab = engine.model_args.vocab_size
    system = [rng.randrange(100, vocab - 100) for _ in range(system_len)]
    pin_and_wait(engine, "profile-system", system, "profile")
    question = [rng.randrange(100, vocab - 100) for _ in range(question_len)]
    ttft(engine, "profile-warm", system + question, "profile", sync)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        with torch.profiler.record_function("pinned_ttft"):
            seconds, _ = ttft(engine, "profile-run", system + question[::-1], "profile", sync)
    engine.unpin("profile-system")
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14)
    cuda = prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=14)
    path = trace_path or os.path.join(tempfile.mkdtemp(), "pinned_trace.json")
    prof.export_chrome_trace(path)
    return (f"pinned TTFT under the profiler {seconds * 1e3:.1f} ms\n{timeline_summary(path)}\n"
            f"{table}\n{cuda}")


def timeline_summary(trace_path: str) -> str:
    """Read a chrome trace of one `pinned_ttft` span: where its wall time went, host vs GPU."""
    with open(trace_path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    span = next(e for e in events if e.get("name") == "pinned_ttft")
    t0, t1 = span["ts"], span["ts"] + span["dur"]
    kernels = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                      and t0 <= e["ts"] <= t1), key=lambda e: e["ts"])
    if not kernels:
        return "timeline: no GPU work recorded"
    first, last = kernels[0]["ts"], max(e["ts"] + e["dur"] for e in kernels)
    busy, gaps, end = 0.0, [], first
    for e in kernels:
        if e["ts"] > end:
            gaps.append(e["ts"] - end)
        busy += max(0.0, e["ts"] + e["dur"] - max(end, e["ts"]))
        end = max(end, e["ts"] + e["dur"])
    runtime = {}
    for e in events:
        if e.get("cat") == "cuda_runtime" and t0 <= e["ts"] <= t1:
            runtime[e["name"]] = runtime.get(e["name"], 0.0) + e["dur"]
    calls = ", ".join(f"{k} {v:.0f} us" for k, v in sorted(runtime.items(), key=lambda kv: -kv[1])[:5])
    big = sorted(gaps, reverse=True)[:5]
    return (f"timeline of the pinned request ({t1 - t0:.0f} us): host before the first GPU op "
            f"{first - t0:.0f} us; GPU span {last - first:.0f} us = busy {busy:.0f} us + {len(gaps)} idle gaps "
            f"{sum(gaps):.0f} us (largest {', '.join(f'{g:.0f}' for g in big)}); host after the last GPU op "
            f"{t1 - last:.0f} us; {len(kernels)} GPU ops; runtime calls: {calls}")
