"""Do the GPU execution modes compute the same thing? `python -m benchmarks --gpu --equality`.

Greedy outputs of the eager engine (no CUDA graphs) are the reference; decode graphs, prefill graphs
and async scheduling must give the same tokens. In bf16 on random weights that comparison says
nothing (near-ties in the logits flip on any change of GEMM tiling), so it runs in fp32, where the
modes differ only by rounding far below the logits' gaps. At a divergence the reference's margin
between its top two logits is printed: a rounding-size margin means a tie; a large one, a bug.

The workload exercises what the modes handle differently: a batch of prompts of mixed lengths with
staggered finishes (graph sizes change every few steps; async scheduling drops wasted steps), prompts
that share a prefix (cache hits), and chat turns after a pinned system prompt one at a time (the
single-sequence prefills that prefill graphs capture).
"""
from __future__ import annotations

import gc
import random

import torch

from inference.config import EngineConfig
from inference.engine import LLMEngine
from inference.models import ModelArgs
from inference.sampling_params import SamplingParams
from .prefix import pin_and_wait

MODES = {
    "eager": dict(enforce_eager=True),
    "decode graphs": dict(prefill_graphs=False, async_scheduling=False),
    "decode+prefill graphs": dict(prefill_graphs=True, async_scheduling=False),
    "async scheduling": dict(prefill_graphs=False, async_scheduling=True),
    "everything on": dict(prefill_graphs=True, async_scheduling=True),
}


def _workload(vocab: int, seed: int = 0):
    rng = random.Random(seed)

    def tokens(n):
        return [rng.randrange(100, vocab - 100) for _ in range(n)]

    shared = tokens(96)
    batch = [tokens(rng.randint(5, 300)) for _ in range(24)] + [shared + tokens(rng.randint(1, 40))
                                                               for _ in range(8)]
    outs = [rng.randint(4, 48) for _ in batch]
    system = tokens(400)
    turns = [tokens(n) for n in (50, 7, 128, 33)]
    return batch, outs, system, turns


def _drain(engine: LLMEngine, results: dict, logprobs: dict) -> None:
    while engine.has_unfinished():
        for d in engine.step():
            if d.error:
                raise RuntimeError(f"{d.request_id}: {d.error}")
            results.setdefault(d.request_id, []).extend(d.token_ids)
            if d.logprobs:
                logprobs.setdefault(d.request_id, []).extend(d.logprobs)


def run_mode(args: ModelArgs, dtype: str, mode: dict, top: int | None, device: str = "cuda") -> tuple[dict, dict]:
    """Run the workload in one mode; returns ({request: tokens}, {request: per-token top logprobs})."""
    config = EngineConfig(model="bench", device=device, dtype=dtype, num_kv_blocks=4096, max_model_len=1024,
                          max_num_seqs=64, max_num_batched_tokens=2048, seed=0, **mode)
    engine = LLMEngine(config, progress=False, model_args=args, weights=None)  # same seed: same weights
    batch, outs, system, turns = _workload(args.vocab_size)
    results: dict = {}
    logprobs: dict = {}
    try:
        for i, (p, n) in enumerate(zip(batch, outs)):
            engine.add_request(f"b{i}", p, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True,
                                                          logprobs=top))
        _drain(engine, results, logprobs)
        pin_and_wait(engine, "system", system, "t")
        for i, q in enumerate(turns):  # one at a time, as employees' chat turns arrive
            engine.add_request(f"t{i}", system + q, SamplingParams(temperature=0, max_tokens=16,
                                                                   ignore_eos=True, logprobs=top), "t")
            _drain(engine, results, logprobs)
        engine.unpin("system")
        pool = engine.block_manager.pool
        if pool.num_free != pool.num_blocks:
            raise RuntimeError(f"{pool.num_blocks - pool.num_free} KV blocks leaked")
    finally:
        del engine
        gc.collect()
        torch.cuda.empty_cache()
    return results, logprobs


def _margin(top: dict[int, float]) -> float:
    best = sorted(top.values(), reverse=True)
    return best[0] - best[1] if len(best) > 1 else float("inf")


def compare(args: ModelArgs, label: str, dtype: str = "float32") -> list[str]:
    ref, ref_lp = run_mode(args, dtype, MODES["eager"], top=2)
    lines = []
    for name, mode in MODES.items():
        if name == "eager":
            continue
        got, _ = run_mode(args, dtype, mode, top=None)
        same = sum(got.get(r) == toks for r, toks in ref.items())
        total = sum(len(t) for t in ref.values())
        line = f"{label} {dtype} {name} vs eager: {same}/{len(ref)} requests identical ({total} tokens)"
        for r, toks in ref.items():
            mine = got.get(r, [])
            if mine != toks:
                at = next((i for i, (a, b) in enumerate(zip(mine, toks)) if a != b), min(len(mine), len(toks)))
                margin = _margin(ref_lp[r][at]) if at < len(ref_lp.get(r, [])) else float("nan")
                line += f"; {r} differs at token {at} (reference top-2 margin {margin:.2e})"
        lines.append(line)
        print(line, flush=True)
    return lines


def main() -> list[str]:
    from .gpu import LLAMA3_8B, SMOLLM2_135M

    from transformers import LlamaConfig

    lines = []
    for label, shape in (("smollm2-135m", SMOLLM2_135M),
                         ("llama3-8b-4-layers", {**LLAMA3_8B, "num_hidden_layers": 4})):
        args = ModelArgs.from_hf_config(LlamaConfig(**shape))
        lines += compare(args, label)
    return lines
