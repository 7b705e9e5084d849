"""GEMM backends at a chat turn's row counts: cuBLAS (default) vs cuBLASLt, row- vs column-major."""
import sys
import torch
sys.path.insert(0, __import__("os").path.dirname(__file__))
from micro import graph_time_us, rel

shapes = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336),
          "lm_head": (128256, 4096)}
sets = 8
for k, (n, kk) in shapes.items():
    ns = 2 if k == "lm_head" else sets
    w = [torch.randn(n, kk, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(ns)]
    wt = [t.t().contiguous().t() for t in w]
    for m in ((1,) if k == "lm_head" else (50, 64)):
        x = torch.randn(m, kk, device="cuda", dtype=torch.bfloat16)
        ref = torch.nn.functional.linear(x, w[0])
        line = []
        for lib in ("cublas", "cublaslt"):
            torch.backends.cuda.preferred_blas_library(lib)
            for name, ws in (("row", w), ("col", wt)):
                fn = lambda i, ws=ws: torch.nn.functional.linear(x, ws[i])  # noqa: E731
                err = rel(fn(0), ref)
                us = graph_time_us(fn, ns)
                line.append(f"{lib}/{name} {us:6.1f} ({n * kk * 2 / us / 1e6:.2f} TB/s{', err %.0e' % err if err else ''})")
        torch.backends.cuda.preferred_blas_library("cublas")
        print(f"{k:8s} M={m:<3d} " + " | ".join(line), flush=True)
    del w, wt
    torch.cuda.empty_cache()
