"""What a sliding window saves in attention: `python -m benchmarks.sliding_window [--smoke] [--out FILE]`.

One layer's paged attention over long contexts, global (window None) against a sliding window, at the
Llama-3-8B attention shape (Hq 32, Hkv 8, D 128, bf16, blocks of 16): decode at batch 1 and 16, and a
512-token chunk after the rest of the context. On CUDA the Triton kernels run (decode split as the
launcher picks, the unsplit prefill kernel); on the CPU (`--smoke`, tiny shapes, fp32) the engine's
batched torch path. Each output is checked against its reference first. The ideal speed-up of a
windowed layer is context / window: it reads only the window's keys.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from kernels import (paged_attention_decode, paged_attention_decode_ref, paged_attention_prefill,
                     paged_attention_prefill_ref, paged_attention_torch, plan_paged_attention)


def _time_ms(fn, repeats: int) -> float:
    """CUDA: do_bench's median; CPU: the fastest of `repeats` runs."""
    if torch.cuda.is_available():
        import triton.testing

        return triton.testing.do_bench(fn, warmup=5, rep=50, return_mode="median")
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return min(times)  # the CPU is often shared: the fastest run is the op's own cost


def _case(batch: int, context: int, q_len: int, heads: tuple[int, int, int], dtype, device):
    num_q_heads, num_kv_heads, head_dim = heads
    per_seq = -(-context // 16)
    shape = (batch * per_seq, 16, num_kv_heads, head_dim)
    k_cache = torch.randn(shape, dtype=dtype, device=device)
    v_cache = torch.randn(shape, dtype=dtype, device=device)
    tables = torch.randperm(batch * per_seq, device=device).view(batch, per_seq).int()
    seq_lens = torch.full((batch,), context, dtype=torch.int32, device=device)
    cu = torch.arange(batch + 1, dtype=torch.int32, device=device) * q_len
    q = torch.randn(batch * q_len, num_q_heads, head_dim, dtype=dtype, device=device)
    return q, k_cache, v_cache, tables, seq_lens, cu


def _attention(q, k_cache, v_cache, tables, seq_lens, cu, q_len: int, window: int | None):
    """The call the engine makes for this step (a closure to time) and its reference's output."""
    scale = q.shape[-1] ** -0.5
    if q.is_cuda and q_len == 1:
        def run():
            return paged_attention_decode(q, k_cache, v_cache, tables, seq_lens, scale, window=window)
    elif q.is_cuda:
        def run():
            return paged_attention_prefill(q, k_cache, v_cache, tables, cu, seq_lens, scale, q_len, window=window)
    else:
        plan = plan_paged_attention(tables, seq_lens, cu, 16, q.shape[0], q.dtype, window)

        def run():
            return paged_attention_torch(q, k_cache, v_cache, plan, scale)
    if q_len == 1:
        ref = paged_attention_decode_ref(q, k_cache, v_cache, tables, seq_lens, scale, window=window)
    else:
        ref = paged_attention_prefill_ref(q, k_cache, v_cache, tables, cu, seq_lens, scale, window=window)
    return run, ref


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU (the torch path)")
    parser.add_argument("--context", type=int, default=None, help="keys per sequence (default 32768; smoke 512)")
    parser.add_argument("--window", type=int, default=None, help="sliding window (default 4096; smoke 64)")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.smoke
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    heads = (32, 8, 128) if cuda else (4, 2, 64)
    context = args.context or (32768 if cuda else 512)
    window = args.window or (4096 if cuda else 64)
    cases = [(1, 1), (16, 1), (1, 512 if cuda else 32)]  # (batch, new tokens)
    print(f"{device} {dtype} heads {heads} context {context} window {window}; ideal speed-up {context / window:.1f}x")
    results = []
    for batch, q_len in cases:
        inputs = _case(batch, context, q_len, heads, dtype, device)
        row = {"batch": batch, "q_len": q_len}
        for name, w in (("global", None), ("window", window)):
            run, ref = _attention(*inputs, q_len, w)
            err = (run().float() - ref.float()).norm() / ref.float().norm()
            if err > 2e-2:
                raise SystemExit(f"batch {batch} q_len {q_len} {name}: relative error {err:.2e} against the reference")
            row[f"{name}_ms"] = _time_ms(run, 30)
        row["speedup"] = row["global_ms"] / row["window_ms"]
        results.append(row)
        print(f"batch {batch:3d} new tokens {q_len:4d}: global {row['global_ms']:8.3f} ms  "
              f"window {row['window_ms']:8.3f} ms  {row['speedup']:5.2f}x")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": device, "context": context, "window": window, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
