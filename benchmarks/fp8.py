"""FP8 against bf16 on one card: `python -m benchmarks.fp8` (GPU, Llama-3-8B shape, random weights).

Three arms, built one after another from the same seeded random weights: bf16, FP8 weights
(quantization="fp8"), FP8 weights + FP8 KV (kv_cache_dtype="fp8"). For each:
- decode throughput (output tok/s over decode-only steps) at 1, 64 and 256 concurrent requests
  (512-token prompts, 128 generated, greedy, EOS ignored);
- weight bytes, and KV blocks: bytes per block, and the blocks that fit in the same 16 GiB;
- quality against bf16 over 1,000 positions (4 random prompts of 250 tokens, teacher-forced): the
  logits' cosine similarity (mean and min) and top-1 agreement. Targets (issue 36): FP8 decode
  >= 1.6x bf16 at 1 and >= 1.4x at 256, cosine >= 0.99, top-1 >= 95%, about 2x the blocks.

`--smoke` runs the same code on a tiny shape on the CPU (fp32; a check that the script works, its
numbers mean nothing).
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time

import torch

from inference.attention import AttentionMetadata
from inference.config import EngineConfig
from inference.engine import LLMEngine
from inference.models import ModelArgs

from .gpu import LLAMA3_8B
from .workload import random_prompts, run_engine

ARMS = {"bf16": dict(), "fp8": dict(quantization="fp8"), "fp8+fp8kv": dict(quantization="fp8", kv_cache_dtype="fp8")}
TINY = dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
            tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
SAME_MEMORY = 16 * 1024 ** 3


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def teacher_forced_logits(engine: LLMEngine, prompts: list[list[int]]) -> torch.Tensor:
    """fp32 logits at every position of each prompt [sum of lengths, vocab], on the CPU. Each prompt is one
    prefill over KV blocks 0.. of an idle engine (no request holds them; the block manager never hashed
    them, so nothing reuses what is written there)."""
    runner = engine.runner
    bs = runner.block_size
    out = []
    for ids in prompts:
        n = len(ids)
        num_blocks = -(-n // bs)
        dev = runner.device
        meta = AttentionMetadata(
            slot_mapping=torch.arange(n, dtype=torch.int64, device=dev),
            block_tables=torch.arange(num_blocks, dtype=torch.int32, device=dev)[None],
            seq_lens=torch.tensor([n], dtype=torch.int32, device=dev),
            cu_seqlens_q=torch.tensor([0, n], dtype=torch.int32, device=dev),
            max_q_len=n, max_seq_len=n, decode_only=False)
        with torch.inference_mode():
            hidden = runner.model(torch.tensor(ids, device=dev), torch.arange(n, device=dev),
                                  runner.step_context(meta))
            out.append(runner.model.compute_logits(hidden).float().cpu())
    return torch.cat(out)


def quality(logits: torch.Tensor, reference: torch.Tensor) -> dict:
    cos = torch.nn.functional.cosine_similarity(logits, reference, dim=-1)
    top1 = (logits.argmax(-1) == reference.argmax(-1)).float().mean().item()
    return {"positions": logits.shape[0], "cosine_mean": cos.mean().item(), "cosine_min": cos.min().item(),
            "top1_agreement": top1}


def run_arm(name: str, model_args: ModelArgs, base: dict, batches: list[int], prompt_len: int, output_len: int,
            quality_prompts: list[list[int]], reference: torch.Tensor | None) -> tuple[dict, torch.Tensor]:
    t0 = time.perf_counter()
    engine = LLMEngine(EngineConfig(**base, **ARMS[name]), progress=False, model_args=model_args)
    runner = engine.runner
    model = runner.model
    weight_bytes = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    result = {"arm": name, "ready_s": round(time.perf_counter() - t0, 1), "weight_bytes": weight_bytes,
              "num_kv_blocks": runner.num_blocks,
              "bytes_per_block": runner.bytes_per_block(),
              "blocks_in_16GiB": SAME_MEMORY // runner.bytes_per_block(), "decode_tok_s": {}}
    logits = teacher_forced_logits(engine, quality_prompts)
    if reference is not None:
        result["quality_vs_bf16"] = quality(logits, reference)
    for batch in batches:
        prompts = random_prompts(batch, [prompt_len] * batch, model_args.vocab_size, seed=batch)
        run_engine(engine, f"warm-{batch}", prompts[:1], [4], sync=_sync)  # first use: allocator, autotune
        run = run_engine(engine, f"{name}-{batch}", prompts, [output_len] * batch, sync=_sync)
        result["decode_tok_s"][batch] = round(run.decode_tok_s, 1)
        print(f"  {name:<10} B={batch:<4} decode {run.decode_tok_s:9.1f} tok/s ({run.decode_step_ms:.2f} ms/step)",
              flush=True)
    engine.shutdown()
    del engine, runner, model
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return result, logits


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fp8", description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny shape on the CPU: checks the script runs")
    ap.add_argument("--batches", default=None, help="comma-separated concurrencies (default 1,64,256)")
    ap.add_argument("--out", default=None, help="write the JSON results here")
    args = ap.parse_args(argv)
    from transformers import LlamaConfig

    if args.smoke:
        shape, batches, prompt_len, output_len, num_q, q_len = TINY, [1, 4], 32, 8, 2, 32
        base = dict(model="bench", device="cpu", dtype="float32", num_kv_blocks=64, max_model_len=256,
                    max_num_seqs=8, max_num_batched_tokens=512)
    elif not torch.cuda.is_available():
        print("python -m benchmarks.fp8 needs a CUDA device (or --smoke)")
        return 2
    else:
        shape, batches, prompt_len, output_len, num_q, q_len = LLAMA3_8B, [1, 64, 256], 512, 128, 4, 250
        # the same pool for every arm: 256 x 640 tokens fit, so no arm preempts
        base = dict(model="bench", device="cuda", dtype="bfloat16", num_kv_blocks=10496, max_model_len=1024,
                    max_num_seqs=256, max_num_batched_tokens=8192)
    if args.batches:
        batches = [int(b) for b in args.batches.split(",")]
    model_args = ModelArgs.from_hf_config(LlamaConfig(**shape))
    quality_prompts = random_prompts(num_q, [q_len] * num_q, model_args.vocab_size, seed=1000)
    results, reference = [], None
    for name in ARMS:
        result, logits = run_arm(name, model_args, base, batches, prompt_len, output_len, quality_prompts, reference)
        reference = logits if reference is None else reference
        results.append(result)
        print(json.dumps(result), flush=True)
    bf16 = results[0]
    print(f"\n{'arm':<10} " + " ".join(f"{'B=' + str(b):>16}" for b in batches)
          + f" {'weights GB':>11} {'blocks/16GiB':>13} {'cosine':>8} {'top-1':>7}")
    for r in results:
        rates = [(r["decode_tok_s"][b], bf16["decode_tok_s"][b]) for b in batches]
        speed = " ".join(f"{tok_s:>9.1f} ({tok_s / max(base, 1e-9):.2f}x)" for tok_s, base in rates)
        q = r.get("quality_vs_bf16")
        print(f"{r['arm']:<10} {speed} {r['weight_bytes'] / 1e9:>11.3f} {r['blocks_in_16GiB']:>13} "
              + (f"{q['cosine_mean']:>8.4f} {q['top1_agreement']:>7.1%}" if q else f"{'-':>8} {'-':>7}"))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
                       "torch": torch.__version__, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
