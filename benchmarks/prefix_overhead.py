"""What the prefix cache costs when nothing hits: one workload with caching on and off, A/B.

Two engines of the same model, one built with `enable_prefix_caching=False`, take the same kind of
workload in turns. Every prompt is new (random tokens, a fresh tenant per round), so with caching on
the block manager does all of its work (hash each full prompt block, look it up, register each block
a step fills) and gains nothing. Two measures:
- wall time of the workload, on against off, the arms alternating (on-off, off-on, ...) so that a
  drift of the machine falls on both; the median of the per-round ratios, with their range.
- the time spent in the block manager (take_cached_prefix, commit, allocate, free: timed around every
  call), on minus off in the same round, as a share of the on arm's wall time: the cache's cost itself
  (hashing, lookups, registering, evicting), which the wall-time A/B resolves only down to its noise.
"""
from __future__ import annotations

import statistics
import time

from inference.engine import LLMEngine
from .workload import random_prompts, run_engine

# Where the block manager hashes, looks up, registers and evicts; with caching off, what is left of them.
BLOCK_MANAGER_CALLS = ("take_cached_prefix", "commit", "allocate", "free")


class _Stopwatch:
    """Replaces a bound method of one object by itself and sums the time spent in it."""

    def __init__(self, owner: object, name: str):
        self.owner, self.name = owner, name
        self.method = getattr(owner, name)
        self.seconds = 0.0
        setattr(owner, name, self)

    def __call__(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return self.method(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0

    def remove(self) -> None:
        delattr(self.owner, self.name)  # the class's method again


def run_prefix_overhead(on: LLMEngine, off: LLMEngine, num_requests: int, prompt_len: int, output_len: int,
                        rounds: int, sync=None) -> dict:
    """`rounds` rounds of the workload in each arm: `on` caches prefixes, `off` is the same model built
    with `enable_prefix_caching=False`. Both must be idle and hold no pin."""
    engines = {True: on, False: off}
    for enabled, engine in engines.items():
        if engine.block_manager.enable_caching != enabled:
            raise ValueError(f"the {'on' if enabled else 'off'} arm's engine has prefix caching "
                             f"{'off' if enabled else 'on'}")
    vocab = on.model_args.vocab_size
    watches = {enabled: [_Stopwatch(e.block_manager, name) for name in BLOCK_MANAGER_CALLS]
               for enabled, e in engines.items()}
    arms: dict[bool, list[dict]] = {True: [], False: []}
    try:
        for engine in engines.values():
            run_engine(engine, "overhead-warmup", random_prompts(2, [prompt_len] * 2, vocab, seed=99_999),
                       [4, 4], sync=sync)
        for r in range(rounds):
            for enabled in (True, False) if r % 2 == 0 else (False, True):
                engine, bm = engines[enabled], engines[enabled].block_manager
                for w in watches[enabled]:
                    w.seconds = 0.0
                hits_before = bm.num_hit_tokens
                prompts = random_prompts(num_requests, [prompt_len] * num_requests, vocab, seed=2 * r + enabled)
                run = run_engine(engine, f"overhead-{r}-{int(enabled)}", prompts, [output_len] * num_requests,
                                 tenant=f"overhead-{r}-{int(enabled)}", sync=sync)
                arms[enabled].append({"seconds": run.seconds, "tok_s": run.tok_s,
                                      "bm_seconds": sum(w.seconds for w in watches[enabled]),
                                      "hit_tokens": bm.num_hit_tokens - hits_before})
    finally:
        for w in watches[True] + watches[False]:
            w.remove()
    on, off = arms[True], arms[False]
    ratios = [a["seconds"] / b["seconds"] for a, b in zip(on, off)]
    shares = [(a["bm_seconds"] - b["bm_seconds"]) / a["seconds"] for a, b in zip(on, off)]
    return {
        "num_requests": num_requests, "prompt_len": prompt_len, "output_len": output_len, "rounds": rounds,
        "on_tok_s": statistics.median(a["tok_s"] for a in on),
        "off_tok_s": statistics.median(b["tok_s"] for b in off),
        "time_ratio_median": statistics.median(ratios), "time_ratio_min": min(ratios),
        "time_ratio_max": max(ratios),
        "cache_share_median": statistics.median(shares), "cache_share_max": max(shares),
        "bm_us_per_request_on": 1e6 * statistics.median(a["bm_seconds"] for a in on) / num_requests,
        "bm_us_per_request_off": 1e6 * statistics.median(b["bm_seconds"] for b in off) / num_requests,
        "hit_tokens": [a["hit_tokens"] for a in on],
    }


def format_prefix_overhead(r: dict) -> str:
    return (f"prefix caching at 0% hits, {r['num_requests']} requests x {r['prompt_len']} prompt + "
            f"{r['output_len']} output tokens, {r['rounds']} rounds per arm (alternating): "
            f"on {r['on_tok_s']:.1f} tok/s, off {r['off_tok_s']:.1f} tok/s; wall time on/off median "
            f"{r['time_ratio_median']:.4f} (range {r['time_ratio_min']:.4f}-{r['time_ratio_max']:.4f}); "
            f"block manager time per request {r['bm_us_per_request_on']:.0f} us on, "
            f"{r['bm_us_per_request_off']:.0f} us off: the cache's work is {100 * r['cache_share_median']:.3f}% "
            f"of the on arm's wall time (max {100 * r['cache_share_max']:.3f}%); hit tokens per round "
            f"{r['hit_tokens']}")
