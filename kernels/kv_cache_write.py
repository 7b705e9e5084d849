"""Scatter this step's keys and values into the paged KV cache.

Cache layout (engine contract): k_cache, v_cache [num_blocks, block_size, num_kv_heads, head_dim],
contiguous. A token's slot is block_id * block_size + offset, so with a contiguous cache the slot is
simply the row index of the flattened [num_blocks * block_size, num_kv_heads, head_dim] view.
"""

import torch
import triton
import triton.language as tl

from kernels._checks import (
    check_device,
    check_dtype,
    check_kv_caches,
    check_last_dim_contiguous,
    check_shape,
)


@triton.jit
def _write_kv_cache_kernel(
    key_ptr,  # [N, Hkv, D]
    value_ptr,  # [N, Hkv, D]
    k_cache_ptr,  # [num_blocks, block_size, Hkv, D], contiguous
    v_cache_ptr,  # [num_blocks, block_size, Hkv, D], contiguous
    slot_mapping_ptr,  # [N] int64, -1 = padding
    stride_key_tok,
    stride_key_head,
    stride_value_tok,
    stride_value_head,
    stride_cache_slot,
    stride_cache_head,
    NUM_KV_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
    if slot < 0:
        return

    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_h[:, None] < NUM_KV_HEADS) & (offs_d[None, :] < HEAD_DIM)

    key = tl.load(
        key_ptr + token * stride_key_tok + offs_h[:, None] * stride_key_head + offs_d[None, :], mask=mask
    )
    value = tl.load(
        value_ptr + token * stride_value_tok + offs_h[:, None] * stride_value_head + offs_d[None, :], mask=mask
    )
    # slot is int64: slot * stride_cache_slot exceeds 2**31 elements in large pools.
    cache_offs = slot * stride_cache_slot + offs_h[:, None] * stride_cache_head + offs_d[None, :]
    tl.store(k_cache_ptr + cache_offs, key, mask=mask)
    tl.store(v_cache_ptr + cache_offs, value, mask=mask)


def check_kv_write_inputs(key, value, k_cache, v_cache, slot_mapping, names: tuple[str, str] = ("key", "value")):
    """The checks of write_kv_cache (also run by rotary's fused rotate-and-write); `names` name key
    and value in the errors."""
    check_kv_caches(k_cache, v_cache)
    _, _, num_kv_heads, head_dim = k_cache.shape
    num_tokens = key.shape[0]
    for name, t in zip(names, (key, value)):
        check_dtype(name, t, (k_cache.dtype,))
        check_shape(name, t, (num_tokens, num_kv_heads, head_dim))
        check_last_dim_contiguous(name, t)
    check_dtype("slot_mapping", slot_mapping, (torch.int64,))
    check_shape("slot_mapping", slot_mapping, (num_tokens,))
    for name, t in (*zip(names, (key, value)), ("v_cache", v_cache), ("slot_mapping", slot_mapping)):
        check_device(name, t, k_cache.device)
    check_device("k_cache", k_cache, k_cache.device)


def write_kv_cache(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write key[i] / value[i] into slot slot_mapping[i] of k_cache / v_cache, in place.

    key, value: [N, Hkv, D] in the cache dtype, last dim contiguous (token/head strides free, so
    views into a fused qkv projection are fine). slot_mapping: int64 [N]; -1 marks padding tokens,
    which are skipped. Slots must be < num_blocks * block_size (not checked: that would need a sync).
    """
    check_kv_write_inputs(key, value, k_cache, v_cache, slot_mapping)
    _, _, num_kv_heads, head_dim = k_cache.shape
    num_tokens = key.shape[0]
    if num_tokens == 0:
        return

    block_h = triton.next_power_of_2(num_kv_heads)
    block_d = triton.next_power_of_2(head_dim)
    _write_kv_cache_kernel[(num_tokens,)](
        key,
        value,
        k_cache,
        v_cache,
        slot_mapping,
        key.stride(0),
        key.stride(1),
        value.stride(0),
        value.stride(1),
        k_cache.stride(1),
        k_cache.stride(2),
        NUM_KV_HEADS=num_kv_heads,
        HEAD_DIM=head_dim,
        BLOCK_H=block_h,
        BLOCK_D=block_d,
        num_warps=1 if block_h * block_d <= 512 else 4,
    )


def write_kv_cache_ref(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Pure-torch write_kv_cache (same arguments, in place); also the engine's CPU path."""
    keep = slot_mapping >= 0
    if not bool(keep.all()):  # padding rows: boolean indexing only then (it costs a nonzero per call)
        key, value, slot_mapping = key[keep], value[keep], slot_mapping[keep]
    num_kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
    k_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, key.to(k_cache.dtype))
    v_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, value.to(v_cache.dtype))
