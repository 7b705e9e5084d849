"""Model families on one card: `python -m benchmarks.models [--only qwen3-8b,...] [--out results.json]`.

For each family, a model of the released shape with random bf16 weights is built on the card by
Hugging Face transformers (no download), then:
- Pagoda's decode throughput at 1, 64 and 256 concurrent requests (512 prompt + 128 output tokens,
  greedy, EOS ignored) against HF `generate` (static batch) on the same weights, same prompts;
- bf16 greedy agreement with HF over the first 16 tokens of 4 prompts (random weights make near-ties,
  so late tokens may drift; the first ones must agree);
- for the MoE family, the fused MoE kernel's time per layer against its floor: the bytes of the
  experts the batch actually routes to, read once at the copy bandwidth measured in the same run;
- fp32 equality on a small shape of every family: greedy tokens identical to HF on the card.

Only one copy of the weights lives on the card at a time: HF builds them, the engine takes a copy, HF
is freed; after the engine's runs HF is built again from the same seed for its own runs. A shape
whose two copies would not fit the card's memory runs with fewer layers (the output says so), and a
batch whose HF KV cache would not fit is skipped for HF (said too).

`--smoke` runs the same code on tiny shapes on the CPU (fp32): a check that the script works; its
numbers mean nothing.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time

import torch

from inference.config import EngineConfig
from inference.engine import LLMEngine
from inference.models import ModelArgs

from .hf_peer import hf_generate, hf_greedy, identical_prefix
from .workload import random_prompts, run_engine

GiB = 1024 ** 3

# Released configurations (the text model's part), as their config.json files give them.
SHAPES = {
    "qwen3-8b": ("Qwen3Config", dict(
        vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
        rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False)),
    "qwen3-30b-a3b": ("Qwen3MoeConfig", dict(
        vocab_size=151936, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
        num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4, head_dim=128, num_experts=128,
        num_experts_per_tok=8, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
        max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False)),
    "gemma3-12b": ("Gemma3TextConfig", dict(
        vocab_size=262208, hidden_size=3840, intermediate_size=15360, num_hidden_layers=48,
        num_attention_heads=16, num_key_value_heads=8, head_dim=256, query_pre_attn_scalar=256,
        sliding_window=1024, sliding_window_pattern=6, max_position_embeddings=131072, rms_norm_eps=1e-6,
        rope_theta=1000000.0, rope_local_base_freq=10000.0, tie_word_embeddings=True)),
    "exaone4-32b": ("Exaone4Config", dict(
        vocab_size=102400, hidden_size=5120, intermediate_size=27392, num_hidden_layers=64,
        num_attention_heads=40, num_key_value_heads=8, head_dim=128, sliding_window=4096,
        sliding_window_pattern=4, max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=1000000.0,
        tie_word_embeddings=False)),
}
# Small shapes of the same families: --smoke's models, and the fp32 equality check on the card.
SMALL = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=2048)
SMALL_EXTRA = {
    "qwen3-8b": dict(num_hidden_layers=2),
    "qwen3-30b-a3b": dict(num_hidden_layers=2, moe_intermediate_size=32, num_experts=8, num_experts_per_tok=2),
    "gemma3-12b": dict(num_hidden_layers=2, sliding_window=32, sliding_window_pattern=2, query_pre_attn_scalar=16),
    "exaone4-32b": dict(num_hidden_layers=2, sliding_window=32, sliding_window_pattern=2),
}
LENGTHS = {False: (512, 128), True: (32, 8)}  # prompt, output tokens: on the card, --smoke


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def hf_config(name: str, small: bool, num_layers: int | None = None):
    import transformers

    cls_name, fields = SHAPES[name]
    fields = dict(fields)
    if small:
        fields.update(SMALL, **SMALL_EXTRA[name])
    if num_layers is not None:
        fields["num_hidden_layers"] = num_layers
    return getattr(transformers, cls_name)(**fields)


def parameter_bytes(config) -> int:
    """bf16 bytes of the model, counted on the meta device (nothing allocated)."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return 2 * sum(p.numel() for p in model.parameters())


def layers_that_fit(name: str, budget: int) -> tuple[int, int]:
    """(layers, full layers): the most layers whose weights fit `budget` bytes twice over (the engine's copy
    is made while HF's exists)."""
    full = SHAPES[name][1]["num_hidden_layers"]
    one, two = parameter_bytes(hf_config(name, False, 1)), parameter_bytes(hf_config(name, False, 2))
    per_layer, rest = two - one, one - (two - one)
    return max(1, min(full, int((budget / 2 - rest) // per_layer))), full


def build_hf(config, device: str, dtype: torch.dtype, seed: int = 0):
    """HF's model with random weights (a plain normal init: HF's own is slow at these sizes and no
    better for timing); the same seed gives the same weights."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype).eval()
    g = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1 or "gemma" in config.model_type:  # Gemma's norms are (1 + w), zeros at init
                p.normal_(0.0, 0.02, generator=g)
    return model


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def kv_bytes_per_token(args: ModelArgs) -> int:
    return 2 * args.num_layers * args.num_kv_heads * args.head_dim * 2


def hf_batch_fits(args: ModelArgs, config, batch: int, wbytes: int, prompt_len: int, output_len: int) -> bool:
    """HF's static batch: its KV cache, the prefill's MLP activations and fp32 logits, beside its weights."""
    if not torch.cuda.is_available():
        return True
    free, _ = torch.cuda.mem_get_info()
    kv = batch * (prompt_len + output_len) * kv_bytes_per_token(args)
    act = batch * prompt_len * (2 * config.intermediate_size + 4 * config.hidden_size) * 2
    logits = batch * config.vocab_size * 4 * 2
    return wbytes + kv + act + logits + 2 * GiB < free


def time_ms(fn) -> float:
    """Median milliseconds of fn: triton's do_bench on the card, a few timed calls on the CPU (--smoke)."""
    if torch.cuda.is_available():
        import triton

        return triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")
    fn()
    t0 = time.perf_counter()
    for _ in range(3):
        fn()
    return (time.perf_counter() - t0) / 3 * 1e3


def moe_floor(engine: LLMEngine, batches: list[int], bandwidth: float) -> list[dict]:
    """One layer's experts through the engine's fused MoE op, at each batch: time per layer against the
    floor, which reads each routed expert's weights once at the measured copy bandwidth."""
    from inference import ops

    layer = next(m for m in engine.runner.model.modules() if getattr(m, "is_moe", False))
    w13, w2 = layer.experts_gate_up, layer.experts_down
    num_experts, top_k = w13.shape[0], layer.top_k
    bytes_per_expert = (w13[0].numel() + w2[0].numel()) * w13.element_size()
    rows = []
    for batch in batches:
        x = torch.randn(batch, w13.shape[-1], dtype=w13.dtype, device=w13.device)
        probs = torch.softmax(torch.randn(batch, num_experts, device=w13.device), -1)
        weights, ids = probs.topk(top_k, -1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        with torch.inference_mode():
            ms = time_ms(lambda: ops.fused_moe(x, w13, w2, weights, ids))
        routed = int(torch.unique(ids).numel())
        floor_ms = routed * bytes_per_expert / bandwidth * 1e3
        rows.append({"batch": batch, "experts_routed": routed, "us_per_layer": round(ms * 1e3, 1),
                     "floor_us": round(floor_ms * 1e3, 1), "of_floor": round(floor_ms / ms, 2)})
        print(f"  MoE layer B={batch:<4} {ms * 1e3:8.1f} us, {routed} experts routed, floor {floor_ms * 1e3:.1f} us "
              f"({floor_ms / ms:.0%} of it)", flush=True)
    return rows


def copy_bandwidth() -> float:
    import triton

    src = torch.empty(1 << 30, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=10, rep=50, return_mode="median")
    return 2 * (1 << 30) * 2 / (ms * 1e-3)


def agreement(engine_tokens: list[list[int]], hf, prompts: list[list[int]], out_len: int) -> dict:
    refs = [hf_greedy(hf, p, out_len) for p in prompts]
    first = sum(int(mine[:1] == ref[:1]) for mine, ref in zip(engine_tokens, refs))
    prefix = sum(identical_prefix(mine, ref) for mine, ref in zip(engine_tokens, refs))
    return {"prompts": len(prompts), "first_token_equal": first, "identical_prefix_tokens": prefix,
            "of_tokens": len(prompts) * out_len}


def run_family(name: str, smoke: bool, batches: list[int], device: str, bandwidth: float | None) -> dict:
    dtype = torch.float32 if smoke else torch.bfloat16
    prompt_len, output_len = LENGTHS[smoke]
    result: dict = {"family": name}
    layers = None
    if not smoke:
        free, _ = torch.cuda.mem_get_info()
        layers, full = layers_that_fit(name, free - 12 * GiB)  # 12 GiB: KV, activations, graphs
        result["layers"] = f"{layers} of {full}" if layers < full else f"{full}"
        if layers < full:
            print(f"  {name}: {layers} of {full} layers (two copies of all would not fit)", flush=True)
        layers = layers if layers < full else None
    config = hf_config(name, smoke, layers)
    args = ModelArgs.from_hf_config(config)
    hf = build_hf(config, device, dtype)
    weights = dict(hf.state_dict())
    wbytes = sum(t.numel() * t.element_size() for t in hf.parameters())
    del hf
    engine_config = EngineConfig(model="bench", device=device, dtype="float32" if smoke else "bfloat16",
                                 max_model_len=prompt_len + output_len + 64,
                                 max_num_seqs=max(batches), max_num_batched_tokens=8192,
                                 **(dict(num_kv_blocks=max(batches) * 48) if smoke else {}))
    t0 = time.perf_counter()
    engine = LLMEngine(engine_config, progress=False, model_args=args, weights=weights)
    del weights
    free_memory()
    result.update(weight_gb=round(wbytes / 1e9, 2), ready_s=round(time.perf_counter() - t0, 1),
                  kv_blocks=engine.runner.num_blocks, engine_tok_s={}, hf_tok_s={}, decode_tok_s={})
    print(f"  {name}: engine ready in {result['ready_s']}s, {wbytes / 1e9:.1f} GB of weights, "
          f"{engine.runner.num_blocks} KV blocks", flush=True)
    agree_prompts = random_prompts(4, [64] * 4, args.vocab_size, seed=1)
    engine_agree = run_engine(engine, "agree", agree_prompts, [16] * 4).token_ids
    for batch in batches:
        prompts = random_prompts(batch, [prompt_len] * batch, args.vocab_size, seed=batch)
        run_engine(engine, f"warm-{batch}", prompts[:1], [4], sync=_sync)
        run = run_engine(engine, f"{name}-{batch}", prompts, [output_len] * batch, sync=_sync)
        result["engine_tok_s"][batch] = round(run.tok_s, 1)
        result["decode_tok_s"][batch] = round(run.decode_tok_s, 1)
        print(f"  engine B={batch:<4} {run.tok_s:9.1f} tok/s end to end, decode {run.decode_tok_s:9.1f} tok/s"
              f" ({run.num_preemptions} preemptions)", flush=True)
    if args.num_experts:  # on the CPU (--smoke) a nominal 50 GB/s: the code runs, the figure means nothing
        result["moe_layer"] = moe_floor(engine, batches, bandwidth or 50e9)
    engine.shutdown()
    del engine
    free_memory()
    hf = build_hf(config, device, dtype)  # the same seed: the same weights
    result["bf16_agreement" if not smoke else "agreement"] = agreement(engine_agree, hf, agree_prompts, 16)
    for batch in batches:
        if not hf_batch_fits(args, config, batch, wbytes, prompt_len, output_len):
            result["hf_tok_s"][batch] = "skipped: its KV cache would not fit"
            print(f"  hf     B={batch:<4} skipped (its KV cache would not fit)", flush=True)
            continue
        prompts = random_prompts(batch, [prompt_len] * batch, args.vocab_size, seed=batch)
        try:
            run = hf_generate(hf, f"hf-{batch}", prompts, output_len, pad_id=0, sync=_sync)
        except torch.OutOfMemoryError:
            result["hf_tok_s"][batch] = "out of memory"
            free_memory()
            continue
        result["hf_tok_s"][batch] = round(run.tok_s, 1)
        print(f"  hf     B={batch:<4} {run.tok_s:9.1f} tok/s end to end", flush=True)
    del hf
    free_memory()
    return result


def fp32_equality(name: str, device: str) -> dict:
    """A small fp32 model of the family: Pagoda's greedy tokens against HF's, on the card."""
    config = hf_config(name, True)
    hf = build_hf(config, device, torch.float32, seed=7)
    args = ModelArgs.from_hf_config(config)
    engine = LLMEngine(EngineConfig(model="bench", device=device, dtype="float32", max_model_len=512,
                                    num_kv_blocks=256, max_num_seqs=4, enforce_eager=True),
                       progress=False, model_args=args, weights=dict(hf.state_dict()))
    prompts = random_prompts(3, [5, 40, 130], args.vocab_size, seed=2)
    ours = run_engine(engine, "eq", prompts, [24] * 3).token_ids
    engine.shutdown()
    same = sum(int(mine == hf_greedy(hf, p, 24)) for mine, p in zip(ours, prompts))
    del hf, engine
    free_memory()
    print(f"  {name} fp32 small shape: {same}/3 prompts' 24 greedy tokens identical to HF", flush=True)
    return {"family": name, "identical": same, "of": 3}


def table(results: list[dict], batches: list[int]) -> str:
    lines = ["| family | layers | weights GB | " + " | ".join(f"B={b} engine / HF tok/s (x)" for b in batches)
             + " | bf16 agreement (first token, greedy prefix) |",
             "|---|---|---:|" + "---:|" * len(batches) + "---|"]
    for r in results:
        cells = []
        for b in batches:
            e, h = r["engine_tok_s"].get(b), r["hf_tok_s"].get(b)
            cells.append(f"{e:,.0f} / {h:,.0f} ({e / h:.2f}x)" if isinstance(h, float) else f"{e:,.0f} / {h}")
        a = r.get("bf16_agreement") or r.get("agreement")
        cells.append(f"{a['first_token_equal']}/{a['prompts']}, {a['identical_prefix_tokens']}/{a['of_tokens']}")
        lines.append(f"| {r['family']} | {r.get('layers', 'small')} | {r['weight_gb']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.models", description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU: checks the script runs")
    ap.add_argument("--only", default=None, help=f"comma-separated families (default all: {', '.join(SHAPES)})")
    ap.add_argument("--batches", default=None, help="comma-separated concurrencies (default 1,64,256)")
    ap.add_argument("--no-equality", action="store_true", help="skip the fp32 small-shape equality check")
    ap.add_argument("--out", default=None, help="write the JSON results here")
    args = ap.parse_args(argv)
    names = args.only.split(",") if args.only else list(SHAPES)
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        print(f"unknown families {unknown}; known: {', '.join(SHAPES)}")
        return 2
    if not args.smoke and not torch.cuda.is_available():
        print("python -m benchmarks.models needs a CUDA device (or --smoke)")
        return 2
    device = "cpu" if args.smoke else "cuda"
    batches = [int(b) for b in args.batches.split(",")] if args.batches else ([1, 4] if args.smoke else [1, 64, 256])
    card = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    bandwidth = copy_bandwidth() if device == "cuda" else None
    print(f"# python -m benchmarks.models on {card}" + (f", copy {bandwidth / 1e12:.2f} TB/s" if bandwidth else ""),
          flush=True)
    results, equality = [], []
    for name in names:
        print(f"# {name}", flush=True)
        results.append(run_family(name, args.smoke, batches, device, bandwidth))
        if not args.no_equality:
            equality.append(fp32_equality(name, device))
    print()
    print(table(results, batches))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": card, "torch": torch.__version__, "copy_bandwidth": bandwidth,
                       "prompt_and_output_len": LENGTHS[args.smoke], "results": results,
                       "fp32_equality": equality}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
