"""Structured outputs' cost: decode steps with 0%, 50% and 100% of the running requests held to a JSON schema.

    python -m benchmarks.structured                      # CPU: the embedded SmolLM2, 64 requests
    python -m benchmarks.structured --smoke              # CPU: 8 requests, a few steps (a test runs this)
    python -m benchmarks.structured --device cuda        # GPU: Llama-3-8B shape, random bf16 weights

Each run submits `--concurrency` requests at once (greedy, EOS ignored, `--output-len` tokens) and times
every decode-only step that runs all of them; a mix's figure is the median of those steps' wall times
(engine.step() returning) and process CPU times, over `--repeats` rounds. Then the grammar's own work
for that many rows is timed alone (bitmask fill, copy, mask). The constrained requests use one schema whose strings
are free, so the grammar never ends a request early. On the GPU the model has random weights and SmolLM2's
tokenizer (49,152 tokens) over Llama-3's 128,256-wide logits: the mask is that wide, while the grammar
walks a vocabulary a third of Llama-3's (a real Llama-3 tokenizer costs the CPU more per token).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from inference import SamplingParams, StructuredOutputsParams
from inference.config import EngineConfig
from inference.engine import LLMEngine

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "title": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "done": {"type": "boolean"},
        "summary": {"type": "string"},
    },
    "required": ["id", "title", "tags", "done", "summary"],
}
MIXES = (0.0, 0.5, 1.0)


def build_engine(args) -> LLMEngine:
    if args.device == "cpu":
        return LLMEngine(EngineConfig(device="cpu", max_num_seqs=max(64, args.concurrency)), progress=False)
    from transformers import AutoTokenizer, LlamaConfig

    from inference.models import ModelArgs
    from .gpu import LLAMA3_8B
    from .serve.model_folder import default_tokenizer_dir

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_from or default_tokenizer_dir())
    free, _ = torch.cuda.mem_get_info()
    weights = 16 * 1024**3  # bf16 Llama-3-8B
    per_block = 2 * 32 * 16 * 8 * 128 * 2
    blocks = min(8192, int((free - weights - 8 * 1024**3) // per_block))  # 8 GiB for activations and graphs
    config = EngineConfig(model="bench", device="cuda", dtype="bfloat16", num_kv_blocks=blocks, max_model_len=2048,
                          max_num_seqs=max(64, args.concurrency))
    return LLMEngine(config, progress=False, model_args=ModelArgs.from_hf_config(LlamaConfig(**LLAMA3_8B)),
                     tokenizer=tokenizer)


def prompts_for(engine: LLMEngine, num: int, prompt_len: int) -> list[list[int]]:
    """Chat prompts asking for a JSON record (the real model's answer follows them), padded to about
    `prompt_len` tokens."""
    tok = engine.tokenizer
    out = []
    for i in range(num):
        text = f"Record {i}: write a JSON object with id, title, tags, done and summary for task number {i}. "
        chat = tok.apply_chat_template([{"role": "user", "content": text * max(1, prompt_len // 30)}],
                                       add_generation_prompt=True, tokenize=False)
        out.append(tok.encode(chat, add_special_tokens=False)[-prompt_len:])
    return out


def run_mix(engine: LLMEngine, prompts: list[list[int]], fraction: float, output_len: int,
            sync) -> list[tuple[float, float]]:
    """(wall s, process CPU s) of each decode-only step that ran every request of this mix. The CPU
    time counts every thread of this process: steadier than the wall time on a shared machine."""
    num_constrained = round(len(prompts) * fraction)
    constraint = StructuredOutputsParams(json=SCHEMA)
    for i, p in enumerate(prompts):
        params = SamplingParams(temperature=0, max_tokens=output_len, ignore_eos=True,
                                structured_outputs=constraint if i < num_constrained else None)
        engine.add_request(f"mix{fraction}-{i}", p, params)
    engine.trace = []
    times = []
    while engine.has_unfinished():
        t0, c0 = time.perf_counter(), time.process_time()
        engine.step()
        sync()
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        last = engine.trace[-1] if engine.trace else None
        if last is not None and last.decode_only and len(last.scheduled) == len(prompts):
            times.append((dt, dc))
        del engine.trace[:-1]
    engine.trace = None
    return times


def grammar_work(engine: LLMEngine, num_rows: int, repeats: int = 30) -> float:
    """Median seconds of what a constrained step adds for `num_rows` rows, alone: fill their bitmask
    rows on the CPU, copy it to the device, mask the logits (matchers a few tokens into the JSON)."""
    from inference.grammar import apply_bitmask, fill_bitmask

    grammars = engine.grammars
    constraint = StructuredOutputsParams(json=SCHEMA)
    prefix = engine.tokenizer.encode('{"id": 12, "title": "Fix the', add_special_tokens=False)
    matchers = []
    for _ in range(num_rows):
        m = grammars.matcher(constraint)
        for t in prefix:
            m.accept_token(t)
        matchers.append(m)
    vocab = engine.model_args.vocab_size
    device = engine.runner.device
    logits = torch.randn(num_rows, vocab, device=device, dtype=engine.runner.dtype)
    host = torch.empty(num_rows, (vocab + 31) // 32, dtype=torch.int32, pin_memory=device.type == "cuda")
    rows = list(range(num_rows))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fill_bitmask(matchers, rows, host)
        apply_bitmask(logits, host.to(device, non_blocking=True), rows)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.structured")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--output-len", type=int, help="tokens per request (default 24 on the CPU, 128 on CUDA)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="8 requests, 6 tokens, one round (CPU)")
    ap.add_argument("--tokenizer-from", help="--device cuda: a folder with SmolLM2's tokenizer files")
    ap.add_argument("--out", help="write the figures here as JSON")
    args = ap.parse_args(argv)
    if args.smoke:
        args.concurrency, args.output_len, args.repeats, args.prompt_len = 8, 6, 1, 32
        args.device = "cpu"
    if args.output_len is None:
        args.output_len = 128 if args.device == "cuda" else 24
    print(f"# python -m benchmarks.structured {' '.join(argv if argv is not None else sys.argv[1:])}")
    print(f"# torch {torch.__version__}, {platform.machine()}, {torch.get_num_threads()} threads, "
          f"device {torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}")
    engine = build_engine(args)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    prompts = prompts_for(engine, args.concurrency, args.prompt_len)
    run_mix(engine, prompts[:2], 1.0, 4, sync)  # warm-up: the grammar's vocabulary, compile, kernels
    steps: dict[float, list[tuple[float, float]]] = {m: [] for m in MIXES}
    for _ in range(args.repeats):
        for mix in MIXES:  # interleaved, so a slow spell of the machine touches every mix
            steps[mix] += run_mix(engine, prompts, mix, args.output_len, sync)
    base_wall = statistics.median(w for w, _ in steps[0.0])
    base_cpu = statistics.median(c for _, c in steps[0.0])
    results = []
    print(f"{'constrained':>11} {'steps':>6} {'wall ms':>9} {'p90':>8} {'vs 0%':>7} {'CPU ms':>9} {'vs 0%':>7}")
    for mix in MIXES:
        walls = sorted(w for w, _ in steps[mix])
        wall, cpu = statistics.median(walls), statistics.median(c for _, c in steps[mix])
        p90 = walls[int(0.9 * (len(walls) - 1))]
        results.append({"constrained": mix, "steps": len(walls), "wall_ms": 1e3 * wall, "wall_p90_ms": 1e3 * p90,
                        "wall_vs_unconstrained": wall / base_wall, "cpu_ms": 1e3 * cpu,
                        "cpu_vs_unconstrained": cpu / base_cpu})
        print(f"{mix:>10.0%} {len(walls):>6} {1e3 * wall:>9.2f} {1e3 * p90:>8.2f} {wall / base_wall - 1:>+7.1%} "
              f"{1e3 * cpu:>9.2f} {cpu / base_cpu - 1:>+7.1%}")
    work = grammar_work(engine, args.concurrency)
    print(f"# the grammar's own work for {args.concurrency} rows (fill, copy, mask): {1e3 * work:.2f} ms a step, "
          f"{work / base_wall:.2%} of an unconstrained step's wall time")
    results.append({"grammar_work_ms": 1e3 * work, "rows": args.concurrency})
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
