"""cuBLASLt algorithms for the skinny GEMMs of a chat turn and of decode, timed: torch's pick vs the
heuristic's other candidates (inference/cublaslt.py), CUDA-graph replays over 8 weight sets."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "2026-12-03"))
sys.path.insert(0, os.getcwd())
from micro import graph_time_us, rel  # noqa: E402

from inference import cublaslt  # noqa: E402

torch.backends.cuda.preferred_blas_library("cublaslt")
print("cublasLt:", cublaslt.lib().path, flush=True)
# name: (out, in, column-major as the engine stores it)
shapes = {"qkv": (6144, 4096, False), "o": (4096, 4096, True), "gate_up": (28672, 4096, True),
          "down": (4096, 14336, True), "lm_head": (128256, 4096, False)}
rows = [int(r) for r in os.environ.get("ROWS", "64,1,16,128,256").split(",")]
sets = 8
summary = []
for name, (n, k, col) in shapes.items():
    ns = 2 if name == "lm_head" else sets
    w = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(ns)]
    if col:
        w = [t.t().contiguous().t() for t in w]
    for m in ((1, 64) if name == "lm_head" else rows):
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        ref = torch.nn.functional.linear(x, w[0])
        base = graph_time_us(lambda i: torch.nn.functional.linear(x, w[i]), ns)
        plan = cublaslt.Plan(cublaslt.Problem.of(x, w[0]))
        cands = plan.candidates(64)
        timed = []
        for j, (algo, wsz) in enumerate(cands):
            try:
                y = plan.run(x, w[0], algo)
                y2 = plan.run(x, w[0], algo)
                torch.cuda.synchronize()
                err, same = rel(y, ref), bool(torch.equal(y, y2))
                us = graph_time_us(lambda i, a=algo: plan.run(x, w[i], a), ns)
            except Exception as e:  # noqa: BLE001
                print(f"  {name} M={m} cand {j}: {type(e).__name__}: {e}", flush=True)
                continue
            timed.append((us, j, err, same, cublaslt.describe(algo), wsz))
        timed.sort(key=lambda t: t[0])
        gb = n * k * 2 / 1e3
        first = next((t for t in timed if t[1] == 0), None)
        print(f"{name:8s} M={m:<3d} torch {base:6.1f} us ({gb / base / 1e3:.2f} TB/s) | heuristic #0 "
              f"{first[0] if first else float('nan'):6.1f} | {len(cands)} candidates", flush=True)
        for us, j, err, same, d, wsz in timed[:6]:
            print(f"    #{j:<2d} {us:6.1f} us ({gb / us / 1e3:.2f} TB/s) err {err:.1e} deterministic {same} "
                  f"ws {wsz >> 10} KiB {d}", flush=True)
        if timed:
            summary.append((name, m, base, timed[0][0], timed[0][3]))
    del w
    torch.cuda.empty_cache()
print("summary (torch -> best deterministic-or-not):")
for name, m, base, best, same in summary:
    print(f"  {name:8s} M={m:<3d} {base:6.1f} -> {best:6.1f} us  ({base - best:+.1f}, det {same})")
