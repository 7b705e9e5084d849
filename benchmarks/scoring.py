"""What scoring a prompt costs: prefill throughput with `prompt_logprobs` against the same prompts without.

    python -m benchmarks.scoring --smoke                 # CPU, a few short prompts of the default model
    python -m benchmarks.scoring --device cuda           # GPU: 64 prompts of 1024 tokens, 3 rounds per arm

Each round submits --num-prompts fresh random prompts (no prefix-cache hit in either arm) with
max_tokens=1, and times until all finish. The arms alternate (plain, scored k=0, scored k=5, plain, ...)
so that a drift of the machine falls on all of them. A scored prompt runs eagerly (no CUDA graph) and
computes the lm_head and a log-softmax over every prompt position, in slices of 256 rows; a plain one
computes them for its last position only.
"""
from __future__ import annotations

import argparse
import statistics
import time

from inference.config import EngineConfig
from inference.engine import LLMEngine
from inference.sampling_params import SamplingParams

from .workload import random_prompts


def run_round(engine: LLMEngine, prompts: list[list[int]], prompt_logprobs: int | None) -> float:
    """Seconds to prefill every prompt (and sample one token each)."""
    params = SamplingParams(max_tokens=1, temperature=0, ignore_eos=True, prompt_logprobs=prompt_logprobs)
    start = time.perf_counter()
    for i, prompt in enumerate(prompts):
        engine.add_request(f"score-{prompt_logprobs}-{time.monotonic_ns()}-{i}", prompt, params)
    while engine.has_unfinished():
        engine.step()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scoring")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--num-prompts", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="4 prompts of 128 tokens, 2 rounds (a CPU check)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.num_prompts, args.prompt_len, args.repeats = 4, 128, 2
    engine = LLMEngine(EngineConfig(model=args.model, device=args.device,
                                    max_model_len=max(2048, args.prompt_len + 16)), progress=False)
    vocab = engine.model_args.vocab_size
    arms = {"plain": None, "scored k=0": 0, "scored k=5": 5}
    run_round(engine, random_prompts(2, [args.prompt_len] * 2, vocab, seed=-1), 0)  # warm-up (and compiles)
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    for r in range(args.repeats):
        for j, (name, k) in enumerate(arms.items()):
            prompts = random_prompts(args.num_prompts, [args.prompt_len] * args.num_prompts, vocab,
                                     seed=r * len(arms) + j)
            seconds[name].append(run_round(engine, prompts, k))
    tokens = args.num_prompts * args.prompt_len
    print(f"# {args.model} on {args.device}: {args.num_prompts} prompts x {args.prompt_len} tokens, "
          f"{args.repeats} rounds per arm (median)")
    plain = statistics.median(seconds["plain"])
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"{name:12s} {tokens / median:10.0f} prompt tok/s   {median * 1e3:9.1f} ms   x{median / plain:.2f} of plain")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
