"""Scatter this step's keys and values into the paged KV cache: the write's checks and its torch
reference (the engine's CPU path). On the GPU the write runs fused with RoPE, in one kernel
(rotary.apply_rotary_and_write_kv), which runs these checks.

Cache layout (engine contract): k_cache, v_cache [num_blocks, block_size, num_kv_heads, head_dim],
contiguous. A token's slot is block_id * block_size + offset, so with a contiguous cache the slot is
simply the row index of the flattened [num_blocks * block_size, num_kv_heads, head_dim] view.
"""

import torch

from kernels._checks import (
    check_device,
    check_dtype,
    check_kv_caches,
    check_last_dim_contiguous,
    check_shape,
)


def check_kv_write_inputs(key, value, k_cache, v_cache, slot_mapping, names: tuple[str, str] = ("key", "value")):
    """The checks of a cache write (run by rotary's fused rotate-and-write); `names` name key and value
    in the errors."""
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


def write_kv_cache_ref(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write key[i] / value[i] [N, Hkv, D] into slot slot_mapping[i] (int64 [N], -1: padding, skipped)
    of k_cache / v_cache, in place; the engine's CPU path (pure torch)."""
    keep = slot_mapping >= 0
    if not bool(keep.all()):  # padding rows: boolean indexing only then (it costs a nonzero per call)
        key, value, slot_mapping = key[keep], value[keep], slot_mapping[keep]
    num_kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
    k_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, key.to(k_cache.dtype))
    v_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, value.to(v_cache.dtype))
