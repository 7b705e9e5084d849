"""Skinny GEMMs in Triton (kernels/skinny_gemm.py) against cuBLAS, alone and in a layer's chain with PDL.

`PYTHONPATH=. python docs/experiments/2026-12-05b/skinny.py [--quick]`

1. Correctness: every projection shape of the 8B model (qkv row-major, o / gate_up / down
   column-major, as the model runner stores them), 50 rows, against F.linear.
2. Each shape alone: F.linear (cuBLASLt preferred, as the model runs) and a sweep of the kernel's
   configs, CUDA-graph replays over 8 weight sets (nothing served from L2). µs and TB/s of weight read.
3. A chat turn's GEMM chain for 32 layers (norm, qkv, o, norm, gate_up, silu, down; the attention is
   left out: o reads q straight from qkv's output), captured in one graph: cuBLAS + our small
   kernels, the Triton GEMM without PDL, and with PDL on every kernel (with and without the L2
   prefetch before the wait). µs per layer.
"""
import os
import statistics
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from skinny_gemm import SkinnyConfig, skinny_gemm  # noqa: E402

M = 50
HIDDEN, INTER, QKV = 4096, 14336, 6144
SHAPES = {"qkv": (QKV, HIDDEN, False), "o": (HIDDEN, HIDDEN, True), "gate_up": (2 * INTER, HIDDEN, True),
          "down": (HIDDEN, INTER, True)}


def weight(n, k, col):
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
    return w.t().contiguous().t() if col else w


def graph_us(fn, calls, replays=20):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(calls):
            fn(i)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            fn(i)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def candidates(n, k):
    out = []
    for bn in (64, 128):
        for bk in (64, 128):
            for split in (1, 2, 4, 8):
                if n % bn or k % (bk * split):
                    continue
                if 64 <= n // bn * split <= 1024:
                    out.append(SkinnyConfig(bn, bk, split, 4))
    return out


def sweep(quick):
    """Every tile shape and split at 4 stages, then 3 and 6 stages for the three fastest."""
    best = {}
    sets = 8
    for name, (n, k, col) in SHAPES.items():
        ws = [weight(n, k, col) for _ in range(sets)]
        x = torch.randn(M, k, device="cuda", dtype=torch.bfloat16)
        ref = F.linear(x, ws[0])
        mb = n * k * 2 / 1e6
        us = graph_us(lambda i: F.linear(x, ws[i]), sets)
        print(f"{name:8s} F.linear {us:6.1f} us {mb / us:.2f} TB/s", flush=True)
        results = []

        def trial(cfg):
            try:
                err = rel(skinny_gemm(x, ws[0], cfg), ref)
                t = graph_us(lambda i: skinny_gemm(x, ws[i], cfg), sets)
            except Exception as e:  # noqa: BLE001
                print(f"  {cfg} failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
                return
            results.append((t, cfg))
            print(f"  bn={cfg.block_n:3d} bk={cfg.block_k:3d} split={cfg.split_k} st={cfg.num_stages}: "
                  f"{t:6.1f} us {mb / t:.2f} TB/s err {err:.1e}", flush=True)

        for cfg in candidates(n, k):
            trial(cfg)
        if not quick:
            for _, cfg in sorted(results, key=lambda r: r[0])[:3]:
                for stages in (3, 6):
                    trial(SkinnyConfig(cfg.block_n, cfg.block_k, cfg.split_k, stages))
        results.sort(key=lambda r: r[0])
        best[name] = results[0][1]
        print(f"  best {name}: {results[0][0]:.1f} us vs F.linear {us:.1f}: {best[name]}", flush=True)
        del ws
        torch.cuda.empty_cache()
    return best


# ---- small kernels of the chain, each optionally PDL-launched (wait, then let the next one launch) ----
@triton.jit
def _norm_kernel(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, eps, H: tl.constexpr, stride_x, PDL: tl.constexpr):
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, H)
    x = (tl.load(x_ptr + row * stride_x + offs).to(tl.float32) + tl.load(res_ptr + row * H + offs).to(tl.float32))
    x = x.to(tl.bfloat16)
    tl.store(res_out_ptr + row * H + offs, x)
    xf = x.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(xf * xf, axis=0) / H + eps)
    y = (xf * rstd).to(tl.bfloat16).to(tl.float32) * tl.load(w_ptr + offs).to(tl.float32)
    tl.store(out_ptr + row * H + offs, y.to(tl.bfloat16))


@triton.jit
def _silu_kernel(x_ptr, out_ptr, I: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr):
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    g = tl.load(x_ptr + row * 2 * I + offs).to(tl.float32)
    u = tl.load(x_ptr + row * 2 * I + I + offs).to(tl.float32)
    tl.store(out_ptr + row * I + offs, (g * tl.sigmoid(g) * u).to(tl.bfloat16))


def norm(x, res, w, out, res_out, pdl):
    extra = {"launch_pdl": True} if pdl else {}
    _norm_kernel[(x.shape[0],)](x, res, w, out, res_out, 1e-5, HIDDEN, x.stride(0), PDL=pdl, num_warps=8, **extra)


def silu(x, out, pdl):
    extra = {"launch_pdl": True} if pdl else {}
    _silu_kernel[(x.shape[0], INTER // 1024)](x, out, INTER, 1024, PDL=pdl, num_warps=4, **extra)


def chain(best, layers=32):
    ws = [{name: weight(n, k, col) for name, (n, k, col) in SHAPES.items()} for _ in range(layers)]
    norm_w = torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16)
    h0 = torch.randn(M, HIDDEN, device="cuda", dtype=torch.bfloat16)
    bufs = {"res": torch.zeros(M, HIDDEN, device="cuda", dtype=torch.bfloat16),
            "res2": torch.empty(M, HIDDEN, device="cuda", dtype=torch.bfloat16),
            "x": torch.empty(M, HIDDEN, device="cuda", dtype=torch.bfloat16),
            "qkv": torch.empty(M, QKV, device="cuda", dtype=torch.bfloat16),
            "h": torch.empty(M, HIDDEN, device="cuda", dtype=torch.bfloat16),
            "gu": torch.empty(M, 2 * INTER, device="cuda", dtype=torch.bfloat16),
            "a": torch.empty(M, INTER, device="cuda", dtype=torch.bfloat16)}

    def gemm(mode, name, x, w, out):
        if mode == "cublas":
            torch.mm(x, w.t(), out=out)
        else:
            cfg = best[name]
            if mode == "pdl-noprefetch":
                cfg = SkinnyConfig(cfg.block_n, cfg.block_k, cfg.split_k, cfg.num_stages, cfg.num_warps, 0)
            skinny_gemm(x, w, cfg, pdl=mode.startswith("pdl"), out=out)

    def forward(mode):
        pdl = mode.startswith("pdl")
        b = bufs
        b["res"].zero_()  # the residual carries over between calls otherwise, so each mode saw another input
        h = h0
        for layer in ws:
            norm(h, b["res"], norm_w, b["x"], b["res2"], pdl)
            gemm(mode, "qkv", b["x"], layer["qkv"], b["qkv"])
            gemm(mode, "o", b["qkv"][:, :HIDDEN], layer["o"], b["h"])
            norm(b["h"], b["res2"], norm_w, b["x"], b["res"], pdl)
            gemm(mode, "gate_up", b["x"], layer["gate_up"], b["gu"])
            silu(b["gu"], b["a"], pdl)
            gemm(mode, "down", b["a"], layer["down"], b["h"])
            h = b["h"]
        return b["h"].clone()

    outs = {}
    for mode in ("cublas", "triton", "pdl", "pdl-noprefetch"):
        try:
            outs[mode] = forward(mode)
            us = graph_us(lambda i: forward(mode), 1, replays=30)
        except Exception as e:  # noqa: BLE001
            print(f"chain {mode}: failed {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        err = rel(outs[mode], outs["cublas"]) if mode != "cublas" else 0.0
        print(f"chain {mode:15s}: {us:8.1f} us for {layers} layers = {us / layers:6.1f} us/layer, "
              f"err vs cublas {err:.1e}", flush=True)
    # Interleaved repeat, so drift between the modes shows.
    for rep in range(2):
        line = []
        for mode in outs:
            line.append(f"{mode} {graph_us(lambda i: forward(mode), 1, replays=30) / layers:6.1f}")
        print(f"chain again {rep}: " + " | ".join(line) + " us/layer", flush=True)


def main():
    quick = "--quick" in sys.argv
    torch.backends.cuda.preferred_blas_library("cublaslt")
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    best = sweep(quick)
    chain(best)


if __name__ == "__main__":
    main()
