"""Running a workload through the engine and measuring it."""
from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass

from inference.engine import LLMEngine
from inference.sampling_params import SamplingParams


@dataclass
class Run:
    name: str
    num_requests: int
    output_tokens: int
    seconds: float
    ttft_p50: float
    ttft_p99: float
    tpot_mean: float  # seconds per output token after the first, per request
    decode_tok_s: float  # output tokens/s over the engine.step() calls whose last step only decoded
    decode_step_ms: float  # mean duration of those calls
    num_preemptions: int
    token_ids: list[list[int]] | None = None  # per request, in prompt order

    @property
    def tok_s(self) -> float:
        return self.output_tokens / self.seconds

    def row(self) -> str:
        return (f"{self.name:<34} {self.num_requests:>5} {self.output_tokens:>7} {self.seconds:>8.2f}s "
                f"{self.tok_s:>9.1f} tok/s  ttft p50 {self.ttft_p50 * 1e3:>8.1f} ms p99 {self.ttft_p99 * 1e3:>8.1f} ms"
                f"  tpot {self.tpot_mean * 1e3:>7.2f} ms  decode {self.decode_tok_s:>9.1f} tok/s"
                f" ({self.decode_step_ms:.2f} ms/step)")


def random_prompts(num: int, lengths: list[int], vocab: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(100, vocab - 100) for _ in range(n)] for n, _ in zip(lengths, range(num))]


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def last_step_decode_only(engine: LLMEngine) -> bool:
    """Whether the last step the engine launched only decoded (read from its trace, which must be on).
    With async scheduling that step may still be in flight: an engine.step() call launches one step and
    completes the one before, so the call is counted as the step it launched."""
    return bool(engine.trace) and engine.trace[-1].decode_only


def run_engine(engine: LLMEngine, name: str, prompts: list[list[int]], output_lens: list[int],
               tenant: str | None = None, sync=None) -> Run:
    """Submit every prompt at once (greedy, EOS ignored) and step until all finish."""
    traced = engine.trace
    engine.trace = []
    try:
        return _run_engine(engine, name, prompts, output_lens, tenant, sync)
    finally:
        engine.trace = traced


def _run_engine(engine: LLMEngine, name: str, prompts: list[list[int]], output_lens: list[int],
                tenant: str | None, sync) -> Run:
    preempt_before = engine.scheduler.num_preemptions
    start = time.perf_counter()
    first: dict[str, float] = {}
    done: dict[str, float] = {}
    counts: dict[str, int] = {}
    tokens: dict[str, list[int]] = {}
    for i, (p, n) in enumerate(zip(prompts, output_lens)):
        engine.add_request(f"{name}-{i}", p, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True),
                           tenant)
    decode_time, decode_tokens, decode_steps = 0.0, 0, 0
    while engine.has_unfinished():
        t0 = time.perf_counter()
        deltas = engine.step()
        if sync is not None:
            sync()
        t1 = time.perf_counter()
        if last_step_decode_only(engine):
            decode_time += t1 - t0
            decode_tokens += len(deltas)
            decode_steps += 1
        del engine.trace[:-1]  # only the last step is read: the trace stays one entry long
        for d in deltas:
            counts[d.request_id] = counts.get(d.request_id, 0) + len(d.token_ids)
            tokens.setdefault(d.request_id, []).extend(d.token_ids)
            first.setdefault(d.request_id, t1)
            if d.finished:
                done[d.request_id] = t1
    seconds = time.perf_counter() - start
    ttfts = [first[r] - start for r in first]
    tpots = [(done[r] - first[r]) / (counts[r] - 1) for r in done if counts[r] > 1]
    return Run(name, len(prompts), sum(counts.values()), seconds, percentile(ttfts, 0.5),
               percentile(ttfts, 0.99), statistics.mean(tpots) if tpots else 0.0,
               decode_tokens / decode_time if decode_time else 0.0,
               1e3 * decode_time / decode_steps if decode_steps else 0.0,
               engine.scheduler.num_preemptions - preempt_before,
               [tokens.get(f"{name}-{i}", []) for i in range(len(prompts))])


def profile_decode(engine: LLMEngine, batch: int, prompt_len: int, sync) -> str:
    """torch.profiler over a few decode steps of `batch` running requests (GPU runs only)."""
    import torch

    prompts = random_prompts(batch, [prompt_len] * batch, engine.model_args.vocab_size, seed=3)
    for i, p in enumerate(prompts):
        engine.add_request(f"prof-{i}", p, SamplingParams(temperature=0, max_tokens=64, ignore_eos=True))
    traced, engine.trace = engine.trace, []
    engine.step()  # the prefill starts
    while not last_step_decode_only(engine):
        engine.step()  # through the rest of the prefill
    engine.trace = traced
    for _ in range(3):
        engine.step()
    sync()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    t0 = time.perf_counter()
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(5):
            engine.step()
        sync()
    wall = (time.perf_counter() - t0) / 5
    gpu = ""
    graphs = engine.runner.graphs
    if graphs is not None and batch <= graphs.max_batch:  # the step's GPU time alone: its graph, replayed
        graph = graphs.graphs[next(s for s in graphs.sizes if s >= batch)]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            graph.replay()
        end.record()
        end.synchronize()
        gpu = f", graph replay alone {start.elapsed_time(end) / 20:.2f} ms/step"
    for i in range(batch):
        engine.abort(f"prof-{i}")
    cpu = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12)
    cuda = prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=24)
    return f"decode B={batch}: {wall * 1e3:.2f} ms/step under the profiler{gpu}\n{cpu}\n{cuda}"
