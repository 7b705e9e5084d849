"""Decode steps of the 8B shape with the projections' GEMMs tuned (inference/gemm_tuner.py) vs torch's
picks, in one process: GPU time of a decode graph replay per batch size, and an end-to-end B=128 run."""
import sys
import time

import torch
from transformers import LlamaConfig

sys.path.insert(0, ".")
from inference.bench.gpu import LLAMA3_8B, sync  # noqa: E402
from inference.bench.workload import random_prompts, run_engine  # noqa: E402
from inference.config import EngineConfig  # noqa: E402
from inference.cuda_graphs import DecodeGraphs  # noqa: E402
from inference.engine import LLMEngine  # noqa: E402
from inference.gemm_tuner import format_choices, replay_us  # noqa: E402
from inference.models import ModelArgs  # noqa: E402

SIZES = (1, 16, 64, 128, 192, 256)


config = EngineConfig(model="bench", device="cuda", dtype="bfloat16", num_kv_blocks=12288, max_model_len=2304,
                      max_num_seqs=256, max_num_batched_tokens=8192, prefill_graphs=True, async_scheduling=False)
t0 = time.perf_counter()
engine = LLMEngine(config, progress=False, model_args=ModelArgs.from_hf_config(LlamaConfig(**LLAMA3_8B)))
print(f"engine (max_num_seqs 256, tuning on) ready in {time.perf_counter() - t0:.1f}s", flush=True)
changed = [c for c in engine.runner.gemm_choices if c.algo is not None]
print(format_choices(changed), flush=True)
vocab = engine.model_args.vocab_size
results = {}
seeds = iter(range(1000, 1010))  # every run its own prompts: no run may hit an earlier one's cached prefix
for label in ("tuned", "torch"):
    if label == "torch":  # drop every choice and capture the decode graphs again
        for m in engine.runner.model.modules():
            if hasattr(m, "tuned"):
                m.tuned.clear()
        engine.runner.graphs = None
        torch.cuda.empty_cache()
        engine.runner.graphs = DecodeGraphs(engine.runner)
    times = {bs: replay_us(engine.runner.graphs.graphs[bs], 20) for bs in SIZES}
    run_engine(engine, "warmup", random_prompts(4, [512] * 4, vocab, seed=next(seeds)), [8] * 4, sync=sync)
    runs = [run_engine(engine, f"{label} B=128 512/128", random_prompts(128, [512] * 128, vocab, seed=next(seeds)),
                       [128] * 128, sync=sync) for _ in range(2)]
    results[label] = (times, runs)
    print(f"{label}: decode graph replay µs " + ", ".join(f"B={b} {t:.0f}" for b, t in times.items()), flush=True)
    for r in runs:
        print(f"  {r.row()}", flush=True)
t_on, r_on = results["tuned"]
t_off, r_off = results["torch"]
print("tuned / torch replay time: " + ", ".join(f"B={b} {t_on[b] / t_off[b]:.3f}" for b in SIZES))
print(f"B=128 end-to-end tok/s tuned / torch: {max(r.tok_s for r in r_on) / max(r.tok_s for r in r_off):.3f}; "
      f"decode tok/s: {max(r.decode_tok_s for r in r_on) / max(r.decode_tok_s for r in r_off):.3f}")
