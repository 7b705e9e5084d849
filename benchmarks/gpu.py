"""The H200 suite: `python -m benchmarks --gpu [--quick] [--out results.json]`.

One run, peer in the same process: a Llama-3-8B-shaped model with random bf16 weights built on the
device (no download) is served by Pagoda and by Hugging Face transformers (`generate`, static batch,
and `generate_batch`, its continuous batching), on B = 1, 64, 256 requests of 512 prompt + 128 output
tokens (greedy, EOS ignored) and on 256 requests with lengths drawn from 100-1024 in and out. Both
share the same weights. Then the prefix benchmark (2,000-token system prompt, cold vs pinned) and the
SmolLM2-135M shape.

The bandwidth floor of a decode step is (weight bytes + KV bytes read) / measured copy bandwidth; the
floor tok/s of a workload is its batch over that step time at the workload's mean context.
"""
from __future__ import annotations

import gc
import json
import random
import time
import traceback

import torch

from inference.config import EngineConfig
from inference.engine import LLMEngine
from inference.models import ModelArgs
from .hf_peer import hf_generate, hf_generate_batch, hf_greedy, identical_prefix
from .prefix import format_prefix, profile_pinned_step, run_prefix_bench
from .prefix_overhead import format_prefix_overhead, run_prefix_overhead
from .workload import Run, profile_decode, random_prompts, run_engine

LLAMA3_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                 rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
                 bos_token_id=128000, eos_token_id=128001)
SMOLLM2_135M = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                    num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                    rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
                    bos_token_id=1, eos_token_id=2)


def sync() -> None:
    torch.cuda.synchronize()


def copy_bandwidth() -> float:
    import triton

    src = torch.randn(1 << 30, dtype=torch.bfloat16, device="cuda")  # 2 GiB
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    del src, dst
    return 2 * (1 << 30) * 2 / (ms * 1e-3)


def matmul_tflops() -> float:
    import triton

    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    ms = triton.testing.do_bench(lambda: a @ b, warmup=25, rep=200, return_mode="median")
    return 2 * 8192**3 / (ms * 1e-3) / 1e12


def hf_peak_bytes(shape: dict, batch: int, prompt_len: int, output_len: int) -> int:
    """What HF `generate` needs beside its weights for one static batch: its KV cache, the prefill's
    activations (the MLP's intermediates dominate) and the logits, with 2 GiB of slack."""
    head_dim = shape["hidden_size"] // shape["num_attention_heads"]
    kv = batch * (prompt_len + output_len) * 2 * shape["num_hidden_layers"] * shape["num_key_value_heads"] * head_dim * 2
    act = batch * prompt_len * (2 * shape["intermediate_size"] + 4 * shape["hidden_size"]) * 2
    return kv + act + batch * shape["vocab_size"] * 4 * 2 + 2 * 1024**3


def kv_blocks_that_fit(shape: dict, weight_bytes_: int, wanted: int, reserve: int, block_size: int = 16) -> int:
    """KV blocks for the engine, sized from the device's free memory (measured now, before the engine
    loads): what is free, less the engine's copy of the weights, `reserve` (the HF peer's peak) and
    4 GiB for the engine's activations, graphs and sampler; at most `wanted`."""
    head_dim = shape["hidden_size"] // shape["num_attention_heads"]
    per_block = 2 * shape["num_hidden_layers"] * block_size * shape["num_key_value_heads"] * head_dim * 2
    free, _ = torch.cuda.mem_get_info()
    budget = free - weight_bytes_ - reserve - 4 * 1024**3
    return max(2, min(wanted, budget // per_block))


def build_hf(shape: dict):
    """HF's model with random bf16 weights on the GPU."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    with torch.device("cuda"):
        hf = LlamaForCausalLM(LlamaConfig(**shape)).to(torch.bfloat16).eval()
    with torch.no_grad():  # HF's own init is slow for 8B; a plain normal init is as good for timing
        for p in hf.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.02)
    return hf


def build_engine(hf, num_kv_blocks: int, max_model_len: int, max_num_seqs: int,
                 async_scheduling: bool) -> LLMEngine:
    """Pagoda's engine over a copy of `hf`'s weights."""
    config = EngineConfig(model="bench", device="cuda", dtype="bfloat16", num_kv_blocks=num_kv_blocks,
                          max_model_len=max_model_len, max_num_seqs=max_num_seqs,
                          max_num_batched_tokens=8192, prefill_graphs=True, async_scheduling=async_scheduling)
    t0 = time.perf_counter()
    engine = LLMEngine(config, progress=False, model_args=ModelArgs.from_hf_config(hf.config),
                       weights=dict(hf.state_dict()))
    print(f"  engine ready in {time.perf_counter() - t0:.1f}s ({engine.runner.num_blocks} KV blocks, "
          f"graphs for {engine.runner.graphs.sizes if engine.runner.graphs else 'none'}, "
          f"async scheduling {'on' if engine.async_scheduling is not None else 'off'})", flush=True)
    return engine


def release_device_memory() -> None:
    """Give the memory of models and engines no longer referenced back to the device."""
    gc.collect()  # an engine with async scheduling is a reference cycle (its AsyncScheduling holds it)
    torch.cuda.empty_cache()


def weight_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def kv_bytes_per_token(args: ModelArgs) -> int:
    return 2 * args.num_layers * args.num_kv_heads * args.head_dim * 2


def floor_tok_s(batch: int, mean_context: float, wbytes: int, kv_per_token: int, bw: float) -> float:
    return batch / ((wbytes + batch * mean_context * kv_per_token) / bw)


def greedy_agreement(hf, engine: LLMEngine, num: int = 4, prompt_len: int = 64, out_len: int = 16) -> str:
    """How many greedy tokens agree with HF (bf16 on random weights: near-ties make late tokens drift)."""
    prompts = random_prompts(num, [prompt_len] * num, engine.model_args.vocab_size, seed=1)
    ours = run_engine(engine, "agree", prompts, [out_len] * num).token_ids
    refs = [hf_greedy(hf, p, out_len) for p in prompts]
    first_match = sum(int(mine[:1] == ref[:1]) for mine, ref in zip(ours, refs))
    total_match = sum(identical_prefix(mine, ref) for mine, ref in zip(ours, refs))
    return (f"first token equal {first_match}/{num}; identical greedy prefix {total_match}/{num * out_len} "
            "tokens")


def prefix_only(args) -> int:
    """`--gpu --prefix`: the pinned-prefix TTFT alone on the 8B shape (random weights, no HF peer)."""
    from transformers import LlamaConfig

    from inference.gemm_tuner import format_choices

    config = EngineConfig(model="bench", device="cuda", dtype="bfloat16", num_kv_blocks=8192, max_model_len=2304,
                          max_num_seqs=8, max_num_batched_tokens=8192, prefill_graphs=True, async_scheduling=False,
                          tune_gemms=not args.no_tune_gemms)
    t0 = time.perf_counter()
    engine = LLMEngine(config, progress=False, model_args=ModelArgs.from_hf_config(LlamaConfig(**LLAMA3_8B)))
    print(f"  engine ready in {time.perf_counter() - t0:.1f}s; GEMM tuning "
          f"{'off' if args.no_tune_gemms else 'on'}", flush=True)
    if engine.runner.gemm_choices:
        print(format_choices(engine.runner.gemm_choices), flush=True)
    repeats = max(args.repeats, 5)
    for seed in range(2):  # twice: the spread between the two is the run's noise
        result = run_prefix_bench(engine, 2000, 50, repeats, sync=sync, seed=seed)
        print(f"llama3-8b prefix: {format_prefix(result)}", flush=True)
    if args.profile:
        print(profile_pinned_step(engine, 2000, 50, sync, args.trace), flush=True)
    return 0


def prefix_overhead_only(args) -> int:
    """`--gpu --prefix-overhead`: the prefix cache's cost at 0% hits on the 8B shape, the suite's B=64
    workload (64 x 512 prompt + 128 output tokens), caching on vs off: two engines side by side, each
    with room for the workload's 64 x 640 tokens (2,560 blocks) and no more, so both fit an 80 GB card."""
    from transformers import LlamaConfig

    model_args = ModelArgs.from_hf_config(LlamaConfig(**LLAMA3_8B))
    on, off = (LLMEngine(EngineConfig(model="bench", device="cuda", dtype="bfloat16", num_kv_blocks=3072,
                                      max_model_len=1024, max_num_seqs=64, max_num_batched_tokens=8192,
                                      prefill_graphs=True, async_scheduling=False,
                                      enable_prefix_caching=caching), progress=False, model_args=model_args)
               for caching in (True, False))
    result = run_prefix_overhead(on, off, 64, 512, 128, max(args.repeats, 4), sync=sync)
    print(f"llama3-8b {format_prefix_overhead(result)}", flush=True)
    return 0


def main(args) -> int:
    if not torch.cuda.is_available():
        print("--gpu needs a CUDA device")
        return 2
    if args.prefix_overhead:
        return prefix_overhead_only(args)
    if args.prefix:
        return prefix_only(args)
    results: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    quick = args.quick
    bw = copy_bandwidth()
    tflops = matmul_tflops()
    results.update(copy_bw=bw, matmul_tflops=tflops)
    print(f"device copy {bw / 1e12:.2f} TB/s, bf16 matmul {tflops:.0f} TFLOP/s", flush=True)
    rows: list[str] = []
    if args.equality:
        from .equality import main as equality_main

        try:
            rows += equality_main()
        except Exception:  # noqa: BLE001
            traceback.print_exc()

    def record(run: Run | str, floor: float | None = None, peer: Run | None = None) -> None:
        if isinstance(run, str):
            rows.append(run)
            print(run, flush=True)
            return
        line = run.row()
        if floor:
            line += f"  floor {floor:,.0f} tok/s: decode at {run.decode_tok_s / floor:.0%}"
        if isinstance(peer, Run) and peer.tok_s > 0:
            line += f"  vs HF {run.tok_s / peer.tok_s:.2f}x"
        rows.append(line)
        results.setdefault("runs", []).append({**run.__dict__, "tok_s": run.tok_s, "floor_tok_s": floor})
        print(line, flush=True)

    suites = [("llama3-8b", LLAMA3_8B, [1, 16] if quick else [1, 64, 256]),
              ("smollm2-135m", SMOLLM2_135M, [1, 64] if quick else [1, 64, 256])]
    for label, shape, batches in suites:
        if args.only and label != args.only:
            continue
        print(f"== {label}", flush=True)
        hf = engine = None
        try:
            hf = build_hf(shape)
            # The mixed workload (256 requests of up to 2,048 tokens) wants 24,576 blocks; fewer only preempt.
            # What fits is measured: free memory less the engine's weights and the HF peer's peak.
            wanted = 24576 if label == "llama3-8b" else 16384
            reserve = 0 if args.no_hf else hf_peak_bytes(shape, max(batches), 512, 128)
            sizing = dict(num_kv_blocks=kv_blocks_that_fit(shape, weight_bytes(hf), wanted, reserve),
                          max_model_len=2304, max_num_seqs=max(batches))
            needed = max(batches) * -(-(512 + 128) // 16)
            if sizing["num_kv_blocks"] < needed:
                print(f"  only {sizing['num_kv_blocks']} KV blocks fit beside the HF peer ({needed} hold "
                      f"B={max(batches)} x 640 tokens): the largest batch will preempt; --no-hf leaves the peer's "
                      "memory to the engine", flush=True)
            engine = build_engine(hf, **sizing, async_scheduling=False)
            wbytes, kvt = weight_bytes(engine.runner.model), kv_bytes_per_token(engine.model_args)
            vocab = engine.model_args.vocab_size
            try:
                rows.append(f"{label} greedy agreement with HF: {greedy_agreement(hf, engine)}")
                print(rows[-1], flush=True)
            except Exception:  # noqa: BLE001
                traceback.print_exc()
            run_engine(engine, "warmup", random_prompts(4, [64] * 4, vocab), [8] * 4, sync=sync)
            if args.profile:
                for b in batches[1:]:
                    print(profile_decode(engine, b, 512, sync), flush=True)
            sync_tokens = {}
            for b in batches:
                prompts = random_prompts(b, [512] * b, vocab, seed=b)
                ours = run_engine(engine, f"{label} pagoda B={b} 512/128", prompts, [128] * b, sync=sync)
                sync_tokens[b] = ours.token_ids
                peer = None if args.no_hf else hf_generate(hf, f"{label} hf generate B={b}", prompts, 128, 0,
                                                           sync=sync)
                record(ours, floor_tok_s(b, 512 + 64, wbytes, kvt, bw), peer)
                if peer is not None:
                    record(peer, floor_tok_s(b, 512 + 64, wbytes, kvt, bw))
            if label == "llama3-8b" and not args.skip_mixed:
                n = 32 if quick else 256
                rng = random.Random(0)
                ins = [rng.randint(100, 1024) for _ in range(n)]
                outs = [rng.randint(100, 1024) for _ in range(n)]
                prompts = random_prompts(n, ins, vocab, seed=7)
                ours = run_engine(engine, f"{label} pagoda {n} req 100-1024 in/out", prompts, outs, sync=sync)
                mean_ctx = sum(i + o / 2 for i, o in zip(ins, outs)) / n
                record(ours, floor_tok_s(min(n, 256), mean_ctx, wbytes, kvt, bw))
                prefix = run_prefix_bench(engine, 2000, 50, 5, sync=sync)
                results["prefix"] = prefix
                rows.append(f"{label} prefix: {format_prefix(prefix)}")
                print(rows[-1], flush=True)
                if args.profile:
                    print(profile_pinned_step(engine, 2000, 50, sync, args.trace), flush=True)
                prompts = random_prompts(n, [512] * n, vocab, seed=11)
                ours = run_engine(engine, f"{label} pagoda {n} req 512/128", prompts, [128] * n, sync=sync)
                peer = None if args.no_hf else hf_generate_batch(
                    hf, f"{label} hf generate_batch {n} req 512/128", prompts, 128, sync=sync)
                record(ours, None, peer)
                if peer is not None:
                    record(peer)
            # The same batches with async scheduling (the host's work on step N+1 done while the GPU
            # runs step N), on an engine built with it, once the synchronous one is gone.
            engine = None  # its KV cache and graphs go before the next engine's are allocated
            release_device_memory()
            engine = build_engine(hf, **sizing, async_scheduling=True)
            run_engine(engine, "warmup", random_prompts(4, [64] * 4, vocab), [8] * 4)
            for b in batches:
                prompts = random_prompts(b, [512] * b, vocab, seed=b)
                # No sync per step here: it would wait for the step in flight and undo the async scheduling.
                run = run_engine(engine, f"{label} pagoda+async B={b} 512/128", prompts, [128] * b)
                record(run, floor_tok_s(b, 512 + 64, wbytes, kvt, bw))
                same = sum(a == c for a, c in zip(run.token_ids, sync_tokens[b]))
                rows.append(f"{label} async scheduling B={b}: {same}/{b} outputs identical to the synchronous run")
                print(rows[-1], flush=True)
        except Exception:  # noqa: BLE001 - one failing model must not hide the other's figures
            traceback.print_exc()
        finally:
            hf = engine = None
            release_device_memory()
    print("\n== summary")
    for r in rows:
        print(r)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0
