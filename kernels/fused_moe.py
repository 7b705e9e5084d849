"""Fused mixture-of-experts MLP: every token's top-k experts, as two grouped GEMMs over the tokens
routed to each expert (the layout of vLLM's fused_moe).

  out[t] = sum_j weight[t, j] * down_e(silu(gate_e(x[t])) * up_e(x[t])),  e = expert[t, j]

The N * top_k (token, expert) pairs are sorted by expert and each expert's run padded to a multiple
of BLOCK_M (`moe_align`), so every BLOCK_M-row tile of the sorted list belongs to one expert: a
program loads that expert's weight tile once and multiplies it by up to BLOCK_M gathered token rows.
Only the experts some token was routed to are read (decode reads top_k * N experts at most, not all
of them). The alignment is torch ops of fixed output shape with no host sync, so a whole MoE layer
is captured in a CUDA graph. Layouts: w13 [E, 2 * I, H] (gate rows, then up rows, as the dense
gate_up projection), w2 [E, H, I].
"""

import torch
import triton
import triton.language as tl

from kernels._checks import FLOAT_DTYPES, check_device, check_dtype, check_shape
from kernels.activation import silu_and_mul, silu_and_mul_ref


def moe_align(topk_ids: torch.Tensor, num_experts: int, block_m: int):
    """topk_ids [N, K] int -> (sorted_ids [P] int32, block_experts [P // block_m] int32, num_padded [1] int32).

    sorted_ids lists the flat pair indices (t * K + j) expert by expert, each expert's run padded to a
    multiple of block_m with N * K (padding: no pair); block_experts names the expert of each tile;
    num_padded is the used length. P = N * K + E * (block_m - 1), rounded up to block_m, is the most
    that padding can need, so the shapes depend on N only.
    """
    flat = topk_ids.flatten().long()  # [M]
    m = flat.numel()
    device = flat.device
    counts = torch.zeros(num_experts, dtype=torch.long, device=device).scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_m - 1) // block_m * block_m
    ends = padded.cumsum(0)
    starts = ends - padded
    order = torch.sort(flat, stable=True).indices  # pair indices, expert by expert
    rank = torch.arange(m, device=device) - (counts.cumsum(0) - counts)[flat[order]]
    size = -(-(m + num_experts * (block_m - 1)) // block_m) * block_m
    sorted_ids = torch.full((size,), m, dtype=torch.int32, device=device)
    sorted_ids[starts[flat[order]] + rank] = order.to(torch.int32)
    block_starts = torch.arange(0, size, block_m, device=device)
    block_experts = torch.searchsorted(ends, block_starts, right=True).clamp_(max=num_experts - 1)
    return sorted_ids, block_experts.to(torch.int32), ends[-1:].to(torch.int32)


@triton.jit
def _grouped_gemm_kernel(
    a_ptr,  # [rows of A, K]: token rows (first GEMM) or pair rows (second)
    b_ptr,  # [E, N, K]: each expert's weight, out x in
    c_ptr,  # [M, N]: one row per (token, expert) pair
    sorted_ids_ptr,  # [P] int32: pair indices by expert, padded with M
    block_experts_ptr,  # [P // BLOCK_M] int32
    num_padded_ptr,  # [1] int32
    weights_ptr,  # [M]: routing weight of each pair (read when MUL_WEIGHT)
    num_pairs,  # M = tokens * top_k
    top_k_rows,  # pair index // top_k_rows = the row of A it reads
    n_size,
    k_size,
    stride_am,
    stride_be,
    stride_bn,
    stride_cm,
    MUL_WEIGHT: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if pid_m * BLOCK_M >= tl.load(num_padded_ptr):
        return  # a tile past the used length (the grid is sized for the worst padding)
    pairs = tl.load(sorted_ids_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))  # [BLOCK_M]
    valid = pairs < num_pairs
    rows = (pairs // top_k_rows).to(tl.int64)
    expert = tl.load(block_experts_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :]  # [BLOCK_M, BLOCK_K]
    b_ptrs = b_ptr + expert * stride_be + offs_n[None, :].to(tl.int64) * stride_bn + offs_k[:, None]  # [K, N]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k_size, BLOCK_K):
        k_ok = offs_k + k0 < k_size
        a = tl.load(a_ptrs, mask=valid[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & (offs_n[None, :] < n_size), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    out = acc.to(c_ptr.dtype.element_ty)
    if MUL_WEIGHT:  # after rounding, as the unfused torch ops do: (down(h) in x's dtype) * weight
        w = tl.load(weights_ptr + pairs, mask=valid, other=0.0).to(tl.float32)
        out = (out.to(tl.float32) * w[:, None]).to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + pairs.to(tl.int64)[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, out, mask=valid[:, None] & (offs_n[None, :] < n_size))


def _grouped_gemm(a, b, out, align, top_k_rows: int, weights: torch.Tensor | None, block_m: int) -> None:
    sorted_ids, block_experts, num_padded = align
    n_size, k_size = b.shape[1], b.shape[2]
    block_n = 64 if n_size >= 64 else max(16, triton.next_power_of_2(n_size))
    block_k = 64 if k_size >= 64 else max(16, triton.next_power_of_2(k_size))
    grid = (sorted_ids.shape[0] // block_m, triton.cdiv(n_size, block_n))
    _grouped_gemm_kernel[grid](
        a, b, out, sorted_ids, block_experts, num_padded, weights if weights is not None else out,
        out.shape[0], top_k_rows, n_size, k_size, a.stride(0), b.stride(0), b.stride(1), out.stride(0),
        MUL_WEIGHT=weights is not None, DOT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32",
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
    )


def _check(x, w13, w2, topk_weights, topk_ids) -> None:
    check_dtype("x", x, FLOAT_DTYPES)
    check_shape("x", x, (None, None))
    num_experts, hidden = w13.shape[0], x.shape[1]
    check_shape("w13", w13, (num_experts, None, hidden))
    if w13.shape[1] % 2:
        raise ValueError(f"w13 rows must be gate | up, an even count, got {w13.shape[1]}")
    check_shape("w2", w2, (num_experts, hidden, w13.shape[1] // 2))
    check_shape("topk_ids", topk_ids, (x.shape[0], None))
    check_shape("topk_weights", topk_weights, tuple(topk_ids.shape))
    check_dtype("topk_ids", topk_ids, (torch.int32, torch.int64))
    for name, t in (("w13", w13), ("w2", w2), ("topk_weights", topk_weights)):
        check_dtype(name, t, (x.dtype,) if name != "topk_weights" else FLOAT_DTYPES)
    for name, t in (("x", x), ("w13", w13), ("w2", w2)):
        if t.stride(-1) != 1:
            raise ValueError(f"{name} must have stride 1 in its last dimension")
    for name, t in (("x", x), ("w13", w13), ("w2", w2), ("topk_weights", topk_weights), ("topk_ids", topk_ids)):
        check_device(name, t, x.device)


def fused_moe(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, topk_weights: torch.Tensor,
              topk_ids: torch.Tensor, block_m: int = 16) -> torch.Tensor:
    """x [N, H], w13 [E, 2I, H], w2 [E, H, I], topk_weights / topk_ids [N, K] -> [N, H] in x's dtype."""
    _check(x, w13, w2, topk_weights, topk_ids)
    n, k = topk_ids.shape
    num_experts, two_i, hidden = w13.shape
    align = moe_align(topk_ids, num_experts, block_m)
    gate_up = torch.empty(n * k, two_i, dtype=x.dtype, device=x.device)  # [M, 2I]
    _grouped_gemm(x, w13, gate_up, align, k, None, block_m)
    h = silu_and_mul(gate_up)  # [M, I]
    down = torch.empty(n * k, hidden, dtype=x.dtype, device=x.device)  # [M, H], weighted
    _grouped_gemm(h, w2, down, align, 1, topk_weights.flatten().contiguous(), block_m)
    return down.view(n, k, hidden).sum(1)


def fused_moe_ref(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, topk_weights: torch.Tensor,
                  topk_ids: torch.Tensor) -> torch.Tensor:
    """Pure-torch fused_moe (same arguments and result): expert by expert over its routed tokens."""
    n, k = topk_ids.shape
    flat_ids = topk_ids.flatten()
    rows = torch.arange(n * k, device=x.device) // k
    weights = topk_weights.flatten().to(x.dtype)
    down = torch.zeros(n * k, x.shape[1], dtype=x.dtype, device=x.device)
    for e in flat_ids.unique().tolist():
        pairs = (flat_ids == e).nonzero().squeeze(1)
        h = silu_and_mul_ref(torch.nn.functional.linear(x[rows[pairs]], w13[e]))
        down[pairs] = torch.nn.functional.linear(h, w2[e]) * weights[pairs, None]
    return down.view(n, k, -1).sum(1)
