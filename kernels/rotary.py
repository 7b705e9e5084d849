"""Rotary position embedding, Hugging Face / NeoX "rotate_half" convention, applied in place.

For x = [x1, x2] (the two halves of head_dim) at position p with angles theta = p * inv_freq:
x1' = x1 * cos - x2 * sin and x2' = x2 * cos + x1 * sin. cos_sin_cache [max_pos, D] fp32 holds
cos(theta) in its first D/2 columns and sin(theta) in its last D/2.
"""

import math

import torch
import triton
import triton.language as tl

from kernels._checks import (
    FLOAT_DTYPES,
    check_device,
    check_dtype,
    check_last_dim_contiguous,
    check_shape,
)
from kernels.kv_cache_write import check_kv_write_inputs, write_kv_cache_ref


def rope_inv_freq(head_dim: int, base: float, rope_scaling: dict | None) -> torch.Tensor:
    """fp32 [head_dim // 2] inverse frequencies, computed exactly as transformers'
    ROPE_INIT_FUNCTIONS do for rope_type None/"default", "linear" and "llama3"."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).to(dtype=torch.float) / head_dim
    inv_freq = 1.0 / (base**exponents)
    rope_type = None if rope_scaling is None else rope_scaling.get("rope_type", rope_scaling.get("type"))
    if rope_type in (None, "default"):
        return inv_freq
    if rope_type == "linear":
        return inv_freq / rope_scaling["factor"]
    if rope_type == "llama3":
        factor = rope_scaling["factor"]
        low_freq_factor = rope_scaling["low_freq_factor"]
        high_freq_factor = rope_scaling["high_freq_factor"]
        old_context_len = rope_scaling["original_max_position_embeddings"]
        low_freq_wavelen = old_context_len / low_freq_factor
        high_freq_wavelen = old_context_len / high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        # Long wavelengths are slowed down by `factor`, short ones kept, the band between blended.
        scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
        smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
        return torch.where(is_medium, blended, scaled)
    raise ValueError(f"unsupported rope_scaling type {rope_type!r} (supported: None, 'linear', 'llama3')")


def build_cos_sin_cache(head_dim: int, max_pos: int, base: float, rope_scaling: dict | None) -> torch.Tensor:
    """[max_pos, head_dim] fp32 CPU tensor: cos(p * inv_freq) | sin(p * inv_freq) for p < max_pos.

    The angles are fp32 products position * inv_freq, as in transformers' rotary embedding forward.
    Move it to the device once at model load.
    """
    if head_dim % 2:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    inv_freq = rope_inv_freq(head_dim, base, rope_scaling)
    angles = torch.outer(torch.arange(max_pos, dtype=torch.float32), inv_freq)  # [max_pos, D/2]
    return torch.cat([angles.cos(), angles.sin()], dim=-1)


@triton.jit
def _rotate_heads(
    x_ptr,  # [N, H, D] for this token, rotated in place
    token,  # int64
    cos,  # [BLOCK_HALF] fp32
    sin,  # [BLOCK_HALF] fp32
    num_heads,
    stride_tok,
    stride_head,
    HALF_DIM: tl.constexpr,
    BLOCK_HEADS: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
):
    """Rotate one token's heads in place; returns the rotated halves (x's dtype) and their mask."""
    offs_h = tl.arange(0, BLOCK_HEADS)
    offs_d = tl.arange(0, BLOCK_HALF)
    mask = (offs_h[:, None] < num_heads) & (offs_d[None, :] < HALF_DIM)
    first = x_ptr + token * stride_tok + offs_h[:, None] * stride_head + offs_d[None, :]
    x1 = tl.load(first, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(first + HALF_DIM, mask=mask, other=0.0).to(tl.float32)
    y1 = (x1 * cos[None, :] - x2 * sin[None, :]).to(x_ptr.dtype.element_ty)
    y2 = (x2 * cos[None, :] + x1 * sin[None, :]).to(x_ptr.dtype.element_ty)
    tl.store(first, y1, mask=mask)
    tl.store(first + HALF_DIM, y2, mask=mask)
    return y1, y2, mask


@triton.jit
def _to_e4m3(x, scale):
    """e4m3(x / scale), saturated at +-448, rounded to nearest even (math in fp32, as quantize_kv_ref).

    The rounding to e4m3's grid is done here in fp32, so the final conversion is exact: Triton's
    interpreter (the CPU tests) converts fp32 -> e4m3 without carrying a rounded-up mantissa into the
    exponent (31.9 becomes 16), and exact values convert the same on every backend."""
    y = tl.clamp(x.to(tl.float32) / scale, -448.0, 448.0)
    # normal range (|y| >= 2^-6): keep 3 of fp32's 23 mantissa bits, ties to even; a carry moves into
    # the exponent by itself
    bits = y.to(tl.int32, bitcast=True)
    bits = (bits + 0x7FFFF + ((bits >> 20) & 1)) & -0x100000  # -0x100000 == ~0xFFFFF
    normal = bits.to(tl.float32, bitcast=True)
    # subnormals: multiples of 2^-9; adding 1.5 * 2^14 (whose fp32 ulp is 2^-9) rounds to them, ties to even
    subnormal = (y + 24576.0) - 24576.0
    subnormal = tl.where(subnormal == 0.0, y * 0.0, subnormal)  # keep the sign of a zero, as torch does
    return tl.where(tl.abs(y) < 0.015625, subnormal, normal).to(tl.float8e4nv)


@triton.jit
def _rotary_kernel(
    q_ptr,  # [N, Hq, D]
    k_ptr,  # [N, Hkv, D]
    v_ptr,  # [N, Hkv, D], read only with WRITE_KV
    positions_ptr,  # [N] int64
    cos_sin_ptr,  # [max_pos, D] fp32, contiguous
    slot_mapping_ptr,  # [N] int64, -1 = padding; only with WRITE_KV
    k_cache_ptr,  # [num_blocks, block_size, Hkv, D], contiguous; only with WRITE_KV
    v_cache_ptr,
    k_scale_ptr,  # [1] fp32; only with FP8_KV
    v_scale_ptr,
    num_q_heads,
    num_kv_heads,
    stride_q_tok,
    stride_q_head,
    stride_k_tok,
    stride_k_head,
    stride_v_tok,
    stride_v_head,
    stride_cache_slot,
    stride_cache_head,
    HALF_DIM: tl.constexpr,
    BLOCK_Q_HEADS: tl.constexpr,
    BLOCK_K_HEADS: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    WRITE_KV: tl.constexpr,  # also store the rotated k and v into the paged cache
    FP8_KV: tl.constexpr,  # the cache is e4m3: store x / scale, saturated at +-448
):
    token = tl.program_id(0).to(tl.int64)
    pos = tl.load(positions_ptr + token).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_HALF)
    mask_d = offs_d < HALF_DIM
    row = cos_sin_ptr + pos * (2 * HALF_DIM)
    cos = tl.load(row + offs_d, mask=mask_d, other=0.0)
    sin = tl.load(row + HALF_DIM + offs_d, mask=mask_d, other=0.0)
    _rotate_heads(
        q_ptr, token, cos, sin, num_q_heads, stride_q_tok, stride_q_head, HALF_DIM, BLOCK_Q_HEADS, BLOCK_HALF
    )
    k1, k2, mask = _rotate_heads(
        k_ptr, token, cos, sin, num_kv_heads, stride_k_tok, stride_k_head, HALF_DIM, BLOCK_K_HEADS, BLOCK_HALF
    )
    if WRITE_KV:
        slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
        if slot >= 0:
            offs_h = tl.arange(0, BLOCK_K_HEADS)
            # slot is int64: slot * stride_cache_slot exceeds 2**31 elements in large pools.
            cache = slot * stride_cache_slot + offs_h[:, None] * stride_cache_head + offs_d[None, :]
            v = v_ptr + token * stride_v_tok + offs_h[:, None] * stride_v_head + offs_d[None, :]
            v1 = tl.load(v, mask=mask)
            v2 = tl.load(v + HALF_DIM, mask=mask)
            if FP8_KV:
                # k1, k2 are already rounded to k's dtype, as the reference quantizes the stored k.
                k_scale = tl.load(k_scale_ptr)
                v_scale = tl.load(v_scale_ptr)
                tl.store(k_cache_ptr + cache, _to_e4m3(k1, k_scale), mask=mask)
                tl.store(k_cache_ptr + cache + HALF_DIM, _to_e4m3(k2, k_scale), mask=mask)
                tl.store(v_cache_ptr + cache, _to_e4m3(v1, v_scale), mask=mask)
                tl.store(v_cache_ptr + cache + HALF_DIM, _to_e4m3(v2, v_scale), mask=mask)
            else:
                tl.store(k_cache_ptr + cache, k1, mask=mask)
                tl.store(k_cache_ptr + cache + HALF_DIM, k2, mask=mask)
                tl.store(v_cache_ptr + cache, v1, mask=mask)
                tl.store(v_cache_ptr + cache + HALF_DIM, v2, mask=mask)


def apply_rotary(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor) -> None:
    """Rotate q [N, Hq, D] and k [N, Hkv, D] in place by positions (int64 [N]).

    q and k need stride 1 in the last dim only (views into a fused qkv output are fine) and must not
    overlap. cos_sin_cache: [max_pos, D] fp32, contiguous, on the same device; positions must be
    < max_pos (not checked: that would need a host sync). Math in fp32, stored in q/k's dtype.
    """
    _check_rotary_inputs(q, k, positions, cos_sin_cache)
    _launch(q, k, positions, cos_sin_cache)


def _check_rotary_inputs(q, k, positions, cos_sin_cache) -> None:
    check_dtype("q", q, FLOAT_DTYPES)
    check_shape("q", q, (None, None, None))
    num_tokens, num_q_heads, head_dim = q.shape
    check_dtype("k", k, (q.dtype,))
    check_shape("k", k, (num_tokens, None, head_dim))
    check_last_dim_contiguous("q", q)
    check_last_dim_contiguous("k", k)
    check_dtype("positions", positions, (torch.int64,))
    check_shape("positions", positions, (num_tokens,))
    check_dtype("cos_sin_cache", cos_sin_cache, (torch.float32,))
    check_shape("cos_sin_cache", cos_sin_cache, (None, head_dim))
    if not cos_sin_cache.is_contiguous():
        raise ValueError("cos_sin_cache must be contiguous")
    if head_dim % 2:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    for name, t in (("q", q), ("k", k), ("positions", positions), ("cos_sin_cache", cos_sin_cache)):
        check_device(name, t, q.device)


def _launch(q, k, positions, cos_sin_cache, v=None, k_cache=None, v_cache=None, slot_mapping=None,
            k_scale=None, v_scale=None) -> None:
    num_tokens, num_q_heads, head_dim = q.shape
    if num_tokens == 0:
        return
    write_kv = k_cache is not None
    fp8_kv = k_scale is not None
    half = head_dim // 2
    block_half = triton.next_power_of_2(half)
    block_q_heads = triton.next_power_of_2(num_q_heads)
    _rotary_kernel[(num_tokens,)](
        q,
        k,
        v if write_kv else k,
        positions,
        cos_sin_cache,
        slot_mapping if write_kv else positions,
        k_cache if write_kv else k,
        v_cache if write_kv else k,
        k_scale if fp8_kv else positions,
        v_scale if fp8_kv else positions,
        num_q_heads,
        k.shape[1],
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        v.stride(0) if write_kv else 0,
        v.stride(1) if write_kv else 0,
        k_cache.stride(1) if write_kv else 0,
        k_cache.stride(2) if write_kv else 0,
        HALF_DIM=half,
        BLOCK_Q_HEADS=block_q_heads,
        BLOCK_K_HEADS=triton.next_power_of_2(k.shape[1]),
        BLOCK_HALF=block_half,
        WRITE_KV=write_kv,
        FP8_KV=fp8_kv,
        num_warps=4 if block_q_heads * block_half >= 1024 else 1,
    )


def apply_rotary_and_write_kv(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> None:
    """apply_rotary(q, k, positions, cos_sin_cache) then write_kv_cache_ref(k, v, k_cache, v_cache,
    slot_mapping, k_scale, v_scale), in one kernel: an attention layer's whole step before attention
    proper.

    Same arguments and contracts as those two (v like k; slot -1 = padding, not written; an e4m3 cache
    needs k_scale / v_scale, fp32 of one element).
    """
    _check_rotary_inputs(q, k, positions, cos_sin_cache)
    # The cache must hold k's heads (checked first, so the error names the cache, not k).
    check_shape("k_cache", k_cache, (None, None, k.shape[1], q.shape[2]))
    check_kv_write_inputs(k, v, k_cache, v_cache, slot_mapping, ("k", "v"), k_scale, v_scale)
    _launch(q, k, positions, cos_sin_cache, v, k_cache, v_cache, slot_mapping, k_scale, v_scale)


def apply_rotary_and_write_kv_ref(q, k, v, positions, cos_sin_cache, k_cache, v_cache, slot_mapping,
                                  k_scale=None, v_scale=None) -> None:
    """Pure-torch apply_rotary_and_write_kv (same arguments, in place)."""
    q_new, k_new = apply_rotary_ref(q, k, positions, cos_sin_cache)
    q.copy_(q_new)
    k.copy_(k_new)
    write_kv_cache_ref(k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale)


def apply_rotary_ref(
    q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pure-torch apply_rotary that RETURNS new rotated (q, k) and leaves its inputs untouched.

    Math in fp32, results in q/k's dtype (the same rounding as the kernel). To use it in place:
    q_new, k_new = apply_rotary_ref(q, k, ...); q.copy_(q_new); k.copy_(k_new).
    """
    half = q.shape[-1] // 2
    cos_sin = cos_sin_cache[positions]  # [N, D]
    cos, sin = cos_sin[:, None, :half], cos_sin[:, None, half:]  # [N, 1, D/2]

    def rotate(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x[..., :half].float(), x[..., half:].float()
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)

    return rotate(q), rotate(k)
