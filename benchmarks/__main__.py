"""python -m benchmarks [--prefix | --prefix-overhead | --gpu] ...  (see benchmarks/__init__.py)"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys

import torch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks")
    ap.add_argument("--prefix", action="store_true",
                    help="TTFT of a long system prompt, cold vs pinned (with --gpu: that alone, on the 8B shape)")
    ap.add_argument("--prefix-overhead", action="store_true",
                    help="the prefix cache's cost at 0%% hits: --num-requests x --prompt-len + --output-len, "
                         "caching on vs off, --repeats rounds per arm (with --gpu: on the 8B shape)")
    ap.add_argument("--gpu", action="store_true", help="the H200 suite (Llama-3-8B shape and SmolLM2 shape)")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    ap.add_argument("--num-requests", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--no-hf", action="store_true", help="skip the Hugging Face peer")
    ap.add_argument("--system-len", type=int, default=2000)
    ap.add_argument("--question-len", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3,
                    help="rounds: engine and HF alternate (default run), or each arm's rounds (--prefix*)")
    ap.add_argument("--quick", action="store_true", help="--gpu: smaller batches, for a smoke run")
    ap.add_argument("--out", default=None, help="--gpu: write the JSON results here")
    ap.add_argument("--only", default=None, help="--gpu: run one model (llama3-8b or smollm2-135m)")
    ap.add_argument("--equality", action="store_true",
                    help="--gpu: first check that graphs / async scheduling give the eager engine's tokens (fp32)")
    ap.add_argument("--skip-mixed", action="store_true", help="--gpu: skip the mixed-length and prefix runs")
    ap.add_argument("--no-tune-gemms", action="store_true",
                    help="--gpu --prefix: keep torch's cuBLAS picks (EngineConfig.tune_gemms=False), for A/B runs")
    ap.add_argument("--profile", action="store_true", help="--gpu: profile one pinned-prefix request")
    ap.add_argument("--trace", default=None, help="--gpu --profile: write the pinned request's chrome trace here")
    args = ap.parse_args(argv)
    print(f"# python -m benchmarks {' '.join(argv if argv is not None else sys.argv[1:])}")
    print(f"# torch {torch.__version__}, {platform.machine()}, {torch.get_num_threads()} threads, "
          f"cuda={torch.cuda.is_available()}")
    if args.gpu:
        from .gpu import main as gpu_main

        return gpu_main(args)

    from inference.config import EngineConfig
    from inference.engine import LLMEngine

    if args.prefix:
        from .prefix import format_prefix, run_prefix_bench

        engine = LLMEngine(EngineConfig(model=args.model, device=args.device,
                                        max_model_len=args.system_len + args.question_len + 64), progress=False)
        print(format_prefix(run_prefix_bench(engine, args.system_len, args.question_len, args.repeats)))
        return 0

    if args.prefix_overhead:
        from .prefix_overhead import format_prefix_overhead, run_prefix_overhead

        on, off = (LLMEngine(EngineConfig(model=args.model, device=args.device, enable_prefix_caching=caching),
                             progress=False) for caching in (True, False))
        print(format_prefix_overhead(run_prefix_overhead(on, off, args.num_requests, args.prompt_len,
                                                         args.output_len, args.repeats)))
        return 0

    from .hf_peer import hf_generate
    from .workload import random_prompts, run_engine

    engine = LLMEngine(EngineConfig(model=args.model, device=args.device), progress=False)
    vocab = engine.model_args.vocab_size
    run_engine(engine, "warmup", random_prompts(2, [args.prompt_len] * 2, vocab), [4, 4])
    hf = None
    if not args.no_hf:
        from transformers import AutoModelForCausalLM

        from inference.model_loader import resolve_model_path

        hf = AutoModelForCausalLM.from_pretrained(resolve_model_path(args.model), dtype=engine.runner.dtype).to(
            engine.runner.device)
    # Engine and peer alternate, --repeats rounds, so both see the same load on a shared machine. Each
    # round draws new prompts: the engine's prefix cache must not serve a round from the one before.
    ratios = []
    for r in range(args.repeats):
        prompts = random_prompts(args.num_requests, [args.prompt_len] * args.num_requests, vocab, seed=1 + r)
        ours = run_engine(engine, f"pagoda B={args.num_requests} #{r + 1}", prompts,
                          [args.output_len] * len(prompts))
        print(ours.row(), flush=True)
        if hf is not None:
            peer = hf_generate(hf, f"hf generate B={args.num_requests} #{r + 1}", prompts, args.output_len,
                               engine.eos_token_ids[0] if engine.eos_token_ids else 0)
            ratios.append(ours.tok_s / peer.tok_s)
            print(peer.row())
            print(f"ratio pagoda / hf: {ratios[-1]:.2f}x output tok/s", flush=True)
    if len(ratios) > 1:
        print(f"ratio pagoda / hf over {len(ratios)} rounds: median {statistics.median(ratios):.2f}x "
              f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
