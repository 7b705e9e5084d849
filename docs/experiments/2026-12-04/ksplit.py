"""Skinny GEMMs split along K as one batched GEMM (the partial sums would be added by the next kernel).

`PYTHONPATH=. python docs/experiments/2026-12-04/ksplit.py`: a chat turn's 50 rows through each
projection of the 8B shape, F.linear (as the model runs it: cuBLASLt preferred, o/gate_up/down weights
column-major) against torch.bmm over S slices of K, timed as CUDA-graph replays over 8 weight sets
(nothing from L2). Prints µs, TB/s of weight read, and the partial sums' error against F.linear.
"""
import os
import sys

import torch

# The graph timer and error measure of the 2026-12-03 microbenchmarks (as blas.py there uses them).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-03"))
from micro import graph_time_us, rel  # noqa: E402


def main():
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    torch.backends.cuda.preferred_blas_library("cublaslt")
    shapes = {"qkv": (6144, 4096, False), "o": (4096, 4096, True), "gate_up": (28672, 4096, True),
              "down": (4096, 14336, True)}
    sets = 8
    for name, (n, k, col) in shapes.items():
        w = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(sets)]
        if col:
            w = [t.t().contiguous().t() for t in w]
        for m in (50, 64):
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            ref = torch.nn.functional.linear(x, w[0])
            us = graph_time_us(lambda i: torch.nn.functional.linear(x, w[i]), sets)
            line = [f"linear {us:5.1f} ({n * k * 2 / us / 1e6:.2f})"]
            for s in (2, 3, 4, 6, 8):
                if k % s or (k // s) % 64:
                    continue
                xs = x.view(m, s, k // s).transpose(0, 1)  # [S, M, K/S], row stride K
                if col:  # W^T is [K, N] contiguous: slices of K are contiguous batches
                    ws = [t.t().reshape(s, k // s, n) for t in w]
                else:  # W is [N, K]: slice K of every row, then transpose each batch
                    ws = [t.view(n, s, k // s).permute(1, 2, 0) for t in w]
                for dt in ("bf16", "fp32"):
                    kw = {} if dt == "bf16" else {"out_dtype": torch.float32}
                    try:
                        part = torch.bmm(xs, ws[0], **kw)
                    except Exception as e:  # noqa: BLE001
                        line.append(f"S={s}/{dt} n/a ({type(e).__name__})")
                        continue
                    err = rel(part.float().sum(0), ref)
                    us_s = graph_time_us(lambda i: torch.bmm(xs, ws[i], **kw), sets)
                    us_sum = graph_time_us(lambda i: torch.bmm(xs, ws[i], **kw).sum(0), sets)
                    line.append(f"S={s}/{dt} {us_s:5.1f} ({n * k * 2 / us_s / 1e6:.2f}) +sum {us_sum:5.1f} err {err:.0e}")
            print(f"{name:8s} M={m:<3d} " + " | ".join(line), flush=True)
        del w
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
