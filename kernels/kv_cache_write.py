"""Scatter this step's keys and values into the paged KV cache: the write's checks and its torch
reference (the engine's CPU path). On the GPU the write runs fused with RoPE, in one kernel
(rotary.apply_rotary_and_write_kv), which runs these checks.

Cache layout (engine contract): k_cache, v_cache [num_blocks, block_size, num_kv_heads, head_dim],
contiguous; float like the keys, or e4m3 (torch.float8_e4m3fn) with one fp32 scale for K and one for V:
stored = e4m3(x / scale), saturated at +-448. A token's slot is block_id * block_size + offset, so with a contiguous cache the slot is
simply the row index of the flattened [num_blocks * block_size, num_kv_heads, head_dim] view.
"""

import torch

from kernels._checks import (
    FLOAT_DTYPES,
    FP8_KV_DTYPE,
    FP8_KV_MAX,
    check_device,
    check_dtype,
    check_kv_caches,
    check_kv_scales,
    check_last_dim_contiguous,
    check_shape,
)


def check_kv_write_inputs(key, value, k_cache, v_cache, slot_mapping, names: tuple[str, str] = ("key", "value"),
                          k_scale=None, v_scale=None):
    """The checks of a cache write (run by rotary's fused rotate-and-write); `names` name key and value
    in the errors. An e4m3 cache takes float keys and values and needs k_scale / v_scale."""
    check_kv_caches(k_cache, v_cache)
    check_kv_scales(k_cache, k_scale, v_scale)
    _, _, num_kv_heads, head_dim = k_cache.shape
    num_tokens = key.shape[0]
    fp8 = k_cache.dtype == FP8_KV_DTYPE
    for name, t in zip(names, (key, value)):
        check_dtype(name, t, FLOAT_DTYPES if fp8 else (k_cache.dtype,))
        check_shape(name, t, (num_tokens, num_kv_heads, head_dim))
        check_last_dim_contiguous(name, t)
    check_dtype("slot_mapping", slot_mapping, (torch.int64,))
    check_shape("slot_mapping", slot_mapping, (num_tokens,))
    for name, t in (*zip(names, (key, value)), ("v_cache", v_cache), ("slot_mapping", slot_mapping)):
        check_device(name, t, k_cache.device)
    check_device("k_cache", k_cache, k_cache.device)
    if fp8 and value.dtype != key.dtype:
        raise TypeError(f"{names[1]} has dtype {value.dtype}, expected {key.dtype} (like {names[0]})")


def quantize_kv_ref(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x (any float dtype) -> e4m3(x / scale), saturated at +-448: what an e4m3 cache stores."""
    return (x.float() / scale.float()).clamp(-FP8_KV_MAX, FP8_KV_MAX).to(FP8_KV_DTYPE)


def write_kv_cache_ref(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> None:
    """Write key[i] / value[i] [N, Hkv, D] into slot slot_mapping[i] (int64 [N], -1: padding, skipped)
    of k_cache / v_cache, in place; the engine's CPU path (pure torch). An e4m3 cache stores
    quantize_kv_ref(key, k_scale) and quantize_kv_ref(value, v_scale)."""
    keep = slot_mapping >= 0
    if not bool(keep.all()):  # padding rows: boolean indexing only then (it costs a nonzero per call)
        key, value, slot_mapping = key[keep], value[keep], slot_mapping[keep]
    num_kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
    if k_cache.dtype == FP8_KV_DTYPE:
        # Through uint8 views: index_copy_ does not cover the float8 dtypes on every device.
        for cache, x, scale in ((k_cache, key, k_scale), (v_cache, value, v_scale)):
            cache.view(torch.uint8).view(-1, num_kv_heads, head_dim).index_copy_(
                0, slot_mapping, quantize_kv_ref(x, scale).view(torch.uint8))
        return
    k_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, key.to(k_cache.dtype))
    v_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, value.to(v_cache.dtype))
