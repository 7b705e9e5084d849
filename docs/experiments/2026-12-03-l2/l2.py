"""Run from the repository root: `PYTHONPATH=. python docs/experiments/2026-12-03-l2/l2.py`.

One device call: does prefetching into L2 (kernels/l2_prefetch.py) speed up the pinned chat turn and
decode? Variants of DecoderLayer.forward, each with the prefill and decode graphs captured again:
  o    the o-projection's weight (33.5 MB on the 8B shape) is prefetched before the attention
  kv   the layer's cached K/V blocks are prefetched at the layer's start (prefill steps only)
  g16  the first 16 MB of the gate_up weight (its first k-slices, column-major) after the o GEMM
  d16  the first 16 MB of the down weight after the gate_up GEMM
  side the prefetch kernels run on a forked stream (joined at the layer's end) instead of in line
For each: pinned TTFT (median of 9, two prompt sets), the size-64 prefill graph's GPU time (events,
median of 20), decode ms/step at B=1 and B=64 (512 + 128 tokens), and greedy tokens vs the base.
"""
import statistics
import sys
import time

import torch  # noqa: E402
import triton

from inference.models import llama
sys.path.insert(0, __import__("os").path.dirname(__file__))  # l2_prefetch beside this file
from l2_prefetch import prefetch_kv_to_l2, prefetch_to_l2  # noqa: E402

ORIGINAL_FORWARD = llama.DecoderLayer.forward


def make_forward(o=False, kv=False, g16=False, d16=False, side=False):
    stream = torch.cuda.Stream() if side else None

    def launch(fn, *a, **k):
        if stream is None:
            fn(*a, **k)
            return
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn(*a, **k)

    def forward(self, h, residual, positions, ctx):
        meta = ctx.meta
        if kv and not meta.decode_only:
            k_cache, v_cache = ctx.kv_caches[self.layer_idx]
            launch(prefetch_kv_to_l2, k_cache, v_cache, meta.block_tables, meta.seq_lens, meta.max_seq_len)
        if residual is None:
            residual = h
            x = self.input_layernorm(h)
        else:
            x, residual = self.input_layernorm(h, residual)
        n = x.shape[0]
        q, k, v = self.qkv_proj(x).split(self.qkv_split, dim=-1)
        q = q.reshape(n, self.num_heads, self.head_dim)
        k = k.reshape(n, self.num_kv_heads, self.head_dim)
        v = v.reshape(n, self.num_kv_heads, self.head_dim)
        if o:
            launch(prefetch_to_l2, self.o_proj.weight)
        attn = ctx.attention(self.layer_idx, q, k, v, positions)
        h = self.o_proj(attn.reshape(n, -1))
        if g16:
            launch(prefetch_to_l2, self.gate_up_proj.weight, 16 << 20)
        x, residual = self.post_attention_layernorm(h, residual)
        gu = self.gate_up_proj(x)
        if d16:
            launch(prefetch_to_l2, self.down_proj.weight, 16 << 20)
        out = self.down_proj(llama.ops.silu_and_mul(gu))
        if stream is not None:
            torch.cuda.current_stream().wait_stream(stream)
        return out, residual

    return forward


def graph_gpu_us(pg, size=64, reps=20):
    g = pg.graphs[size]
    ts = []
    for _ in range(reps):
        torch.cuda.synchronize()
        torch.cuda._sleep(1_000_000)  # the launch off the critical path: GPU time alone
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    return statistics.median(ts)


def main():
    from transformers import LlamaConfig

    from inference.bench.gpu import LLAMA3_8B
    from inference.bench.prefix import run_prefix_bench
    from inference.bench.workload import random_prompts, run_engine
    from inference.config import EngineConfig
    from inference.cuda_graphs import DecodeGraphs, PrefillGraphs
    from inference.engine import LLMEngine
    from inference.models import ModelArgs

    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    t0 = time.time()
    config = EngineConfig(model="bench", device="cuda", dtype="bfloat16", num_kv_blocks=8192, max_model_len=2304,
                          max_num_seqs=64, max_num_batched_tokens=8192, prefill_graphs=True,
                          async_scheduling=False)
    engine = LLMEngine(config, progress=False, model_args=ModelArgs.from_hf_config(LlamaConfig(**LLAMA3_8B)))
    print(f"engine ready in {time.time() - t0:.0f} s", flush=True)
    r = engine.runner
    vocab = engine.model_args.vocab_size
    agree_prompts = random_prompts(4, [2100, 60, 700, 33], vocab, seed=7)
    variants = [("base", {}), ("o", dict(o=True)), ("o+kv", dict(o=True, kv=True)), ("kv", dict(kv=True)),
                ("o+kv+g16", dict(o=True, kv=True, g16=True)), ("o+kv+g16+d16", dict(o=True, kv=True, g16=True, d16=True)),
                ("o+kv side", dict(o=True, kv=True, side=True)), ("base again", {})]
    only = sys.argv[1:]
    reference = None
    for name, flags in variants:
        if only and name not in only:
            continue
        llama.DecoderLayer.forward = make_forward(**flags) if flags else ORIGINAL_FORWARD
        r.prefill_graphs = None
        r.graphs = None
        torch.cuda.empty_cache()
        r.prefill_graphs = PrefillGraphs(r)
        r.graphs = DecodeGraphs(r)
        res = [run_prefix_bench(engine, 2000, 50, 9, sync=torch.cuda.synchronize, seed=s) for s in (0, 1)]
        gpu = graph_gpu_us(r.prefill_graphs)
        tokens = run_engine(engine, f"agree-{name}", agree_prompts, [8] * 4).token_ids
        if reference is None:
            reference = tokens
        same = sum(a == b for a, b in zip(tokens, reference))
        dec = []
        for batch in (1, 64):
            prompts = random_prompts(batch, [512] * batch, vocab, seed=batch)
            run = run_engine(engine, f"dec-{name}-{batch}", prompts, [128] * batch)
            dec.append(run.decode_step_ms)
        print(f"{name:14s} pinned {res[0]['pinned_ttft_ms']:.2f} / {res[1]['pinned_ttft_ms']:.2f} ms "
              f"(cold {res[0]['cold_ttft_ms']:.1f} / {res[1]['cold_ttft_ms']:.1f}; {res[0]['speedup']:.2f}x / "
              f"{res[1]['speedup']:.2f}x)  graph64 GPU {gpu:.0f} us  decode B=1 {dec[0]:.2f} ms/step, "
              f"B=64 {dec[1]:.2f} ms/step  greedy same as base {same}/4   [{time.time() - t0:.0f} s]", flush=True)
    llama.DecoderLayer.forward = ORIGINAL_FORWARD


if __name__ == "__main__":
    main()
