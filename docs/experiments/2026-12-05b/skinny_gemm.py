"""y = x @ w.T for few rows (a chat turn's or a decode step's tokens) against a large weight.

Such a product is bound by reading the weight once; cuBLAS reads it at 2.8-4.1 TB/s on an H200
(o_proj 2.9, gate_up 3.9), and a chain of them pays each kernel's start and end. This kernel is
written so that a chain can overlap: launched with programmatic dependent launch (PDL), its programs
start while the kernel before it is finishing, ask L2 for the first tiles of their weight slice
(which does not depend on that kernel), and only then wait for it (`griddepcontrol.wait`) before
reading x. They let the next kernel launch at once for the same reason.

Grid (N tiles, K splits): each program owns BLOCK_N output columns and one K range; with SPLIT_K > 1
the programs of a column tile write fp32 partials and the last to finish (an atomic counter it
resets afterwards, so a CUDA graph replays cleanly) adds them and stores y.

w is [N, K] row-major (K contiguous) or column-major (strides (1, N)); x [M, K] with unit stride in
K; M <= BLOCK_M.
"""

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@dataclass(frozen=True)
class SkinnyConfig:
    block_n: int
    block_k: int
    split_k: int
    num_stages: int
    num_warps: int = 4
    prefetch_tiles: int = 2  # K tiles per program asked of L2 before waiting for the kernel before (PDL)


@triton.jit
def _bulk_prefetch(addr, num_bytes):
    """One bulk L2 prefetch per element (sm_90): nothing is waited for; the dummy result keeps the asm."""
    return tl.inline_asm_elementwise(
        "cp.async.bulk.prefetch.L2.global [$1], $2;\n\tmov.u32 $0, 0;",
        "=r,l,r",
        [addr, num_bytes],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _skinny_gemm_kernel(
    x_ptr, w_ptr, y_ptr, part_ptr, count_ptr,
    M, N, K: tl.constexpr,  # constexpr: the loop's trip count (a model has few distinct K)
    stride_xm, stride_wn, stride_wk, stride_ym,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
    W_K_CONTIGUOUS: tl.constexpr, USE_PDL: tl.constexpr, PREFETCH_TILES: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    k_span = K // SPLIT_K
    k0 = pid_k * k_span
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    esize: tl.constexpr = w_ptr.dtype.element_ty.primitive_bitwidth // 8
    if USE_PDL:
        if PREFETCH_TILES > 0:
            if W_K_CONTIGUOUS:  # each of the tile's rows holds its K range contiguously
                addr = w_ptr + offs_n.to(tl.int64) * stride_wn + k0
                _bulk_prefetch(addr, tl.full([BLOCK_N], PREFETCH_TILES * BLOCK_K * esize, tl.int32))
            else:  # column-major: each k holds the tile's BLOCK_N columns contiguously
                kk = k0 + tl.arange(0, PREFETCH_TILES * BLOCK_K)
                addr = w_ptr + kk.to(tl.int64) * stride_wk + pid_n * BLOCK_N
                _bulk_prefetch(addr, tl.full([PREFETCH_TILES * BLOCK_K], BLOCK_N * esize, tl.int32))
        gdc_wait()
        gdc_launch_dependents()
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    x_rows = x_ptr + offs_m[:, None] * stride_xm
    w_cols = w_ptr + offs_n[None, :].to(tl.int64) * stride_wn
    for i in range(0, k_span // BLOCK_K):
        k = k0 + i * BLOCK_K
        x = tl.load(x_rows + (k + offs_k)[None, :], mask=offs_m[:, None] < M, other=0.0)  # [BM, BK]
        w = tl.load(w_cols + (k + offs_k)[:, None].to(tl.int64) * stride_wk)  # [BK, BN]
        acc = tl.dot(x, w, acc)
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :]
    mask_y = offs_m[:, None] < M
    if SPLIT_K == 1:
        tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask_y)
    else:
        part = part_ptr + (pid_k * BLOCK_M + offs_m)[:, None].to(tl.int64) * N + offs_n[None, :]
        tl.store(part, acc)
        tl.debug_barrier()  # every thread's partial is stored before the counter moves
        done = tl.atomic_add(count_ptr + pid_n, 1, sem="acq_rel")
        if done == SPLIT_K - 1:  # the last split of this column tile adds them all
            total = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
            for s in range(SPLIT_K):
                p = part_ptr + (s * BLOCK_M + offs_m)[:, None].to(tl.int64) * N + offs_n[None, :]
                total += tl.load(p, cache_modifier=".cg")
            tl.store(y_ptrs, total.to(y_ptr.dtype.element_ty), mask=mask_y)
            tl.atomic_xchg(count_ptr + pid_n, 0)  # ready for the next launch (graph replays)


_COUNTERS: dict[torch.device, torch.Tensor] = {}


def _counters(device: torch.device, n: int) -> torch.Tensor:
    """Zeroed int32 counters that the kernel leaves zeroed (one per column tile)."""
    c = _COUNTERS.get(device)
    if c is None or c.numel() < n:
        c = torch.zeros(max(n, 4096), dtype=torch.int32, device=device)
        _COUNTERS[device] = c
    return c


def skinny_gemm(x: torch.Tensor, w: torch.Tensor, config: SkinnyConfig, *, pdl: bool = False,
                out: torch.Tensor | None = None) -> torch.Tensor:
    """x [M, K] (K contiguous), w [N, K] row- or column-major -> x @ w.T [M, N] in x's dtype."""
    m, k = x.shape
    n = w.shape[0]
    if w.shape[1] != k:
        raise ValueError(f"x is [{m}, {k}] but w is {tuple(w.shape)}")
    if x.stride(1) != 1:
        raise ValueError("x must have unit stride along K")
    if w.stride(1) == 1:
        k_contiguous = True
    elif w.stride(0) == 1:
        k_contiguous = False
    else:
        raise ValueError(f"w must be row- or column-major, strides {w.stride()}")
    block_m = max(16, triton.next_power_of_2(m))
    if block_m > 64:
        raise ValueError(f"skinny_gemm takes at most 64 rows, got {m}")
    c = config
    if n % c.block_n or k % (c.block_k * c.split_k):
        raise ValueError(f"[{n}, {k}] does not tile by {c}")
    if out is None:
        out = torch.empty(m, n, dtype=x.dtype, device=x.device)
    tiles = n // c.block_n
    if c.split_k > 1:
        part = torch.empty(c.split_k * block_m, n, dtype=torch.float32, device=x.device)
        count = _counters(x.device, tiles)
    else:
        part = count = out
    extra = {"launch_pdl": True} if pdl else {}
    _skinny_gemm_kernel[(tiles, c.split_k)](
        x, w, out, part, count, m, n, k,
        x.stride(0), w.stride(0), w.stride(1), out.stride(0),
        BLOCK_M=block_m, BLOCK_N=c.block_n, BLOCK_K=c.block_k, SPLIT_K=c.split_k,
        W_K_CONTIGUOUS=k_contiguous, USE_PDL=pdl, PREFETCH_TILES=c.prefetch_tiles if pdl else 0,
        num_warps=c.num_warps, num_stages=c.num_stages, **extra,
    )
    return out
