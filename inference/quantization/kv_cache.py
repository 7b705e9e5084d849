"""The FP8 (e4m3) KV cache: written quantized, read through a separate dequantize step.

K and V of each layer have one fp32 scale each (`kv_scales` [num_layers, 2], 1.0 unless calibrated),
stored value = e4m3(x / scale). Attention does not read e4m3 itself: `dequantize_blocks` gathers the
blocks a step's block tables name into a model-dtype copy (with block tables renumbered to it), which the
unchanged paged attention kernels and references read. That step is the one place to delete once the
paged attention kernels load e4m3 and multiply by the scale themselves (docs/MODELS.md, "FP8").
"""
from __future__ import annotations

import torch

import kernels

from ..attention import AttentionMetadata, StepContext
from .fp8 import FP8_DTYPE, FP8_MAX


def quantize_kv(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x (any float dtype) -> e4m3(x / scale), saturated at +-448."""
    return (x.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)


def write_kv_fp8(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 slot_mapping: torch.Tensor, k_scale: torch.Tensor, v_scale: torch.Tensor) -> None:
    """Quantize k, v [N, Hkv, D] and write them at slot_mapping [N] (-1: padding, skipped) into the e4m3
    caches [num_blocks, block_size, Hkv, D]."""
    keep = slot_mapping >= 0
    slots = slot_mapping[keep]
    num_kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
    # Indexing goes through uint8 views: index_put / index_select cover every byte dtype on every device.
    for cache, x, scale in ((k_cache, k, k_scale), (v_cache, v, v_scale)):
        cache.view(torch.uint8).view(-1, num_kv_heads, head_dim)[slots] = quantize_kv(x[keep], scale).view(torch.uint8)


def dequantize_blocks(k_cache: torch.Tensor, v_cache: torch.Tensor, block_tables: torch.Tensor,
                      k_scale: torch.Tensor, v_scale: torch.Tensor, dtype: torch.dtype
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The distinct blocks that block_tables [B, W] name, dequantized to `dtype`: (k, v [U, block_size, Hkv, D],
    block tables [B, W] int32 into them). Only distinct blocks are copied, so the copy is never larger
    than the blocks in use (padding entries all name one block)."""
    ids, tables = torch.unique(block_tables.long(), return_inverse=True)  # [U], [B, W]
    # e4m3 -> bf16/fp16/fp32 is exact; scaling in `dtype` keeps the copy at its final size
    k = k_cache.view(torch.uint8)[ids].view(FP8_DTYPE).to(dtype) * k_scale.to(dtype)
    v = v_cache.view(torch.uint8)[ids].view(FP8_DTYPE).to(dtype) * v_scale.to(dtype)
    return k, v, tables.to(torch.int32)


def _rotate(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor) -> None:
    """Rotary in place (on CUDA the Triton kernel; elsewhere its reference)."""
    if q.is_cuda:
        kernels.apply_rotary(q, k, positions, cos_sin_cache)
    else:
        q_new, k_new = kernels.apply_rotary_ref(q, k, positions, cos_sin_cache)
        q.copy_(q_new)
        k.copy_(k_new)


class Fp8KVStepContext(StepContext):
    """A StepContext over e4m3 KV caches: rotate, quantize-and-write, dequantize the step's blocks, attend."""

    def __init__(self, kv_caches: list[tuple[torch.Tensor, torch.Tensor]], meta: AttentionMetadata,
                 cos_sin_cache: torch.Tensor, scale: float, kv_scales: torch.Tensor,
                 windows: list[int | None] | None = None):
        super().__init__(kv_caches, meta, cos_sin_cache, scale, windows)
        self.kv_scales = kv_scales  # [num_layers, 2] fp32: (k_scale, v_scale) of each layer

    def attention(self, layer_idx: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  positions: torch.Tensor) -> torch.Tensor:
        k_cache, v_cache = self.kv_caches[layer_idx]
        k_scale, v_scale = self.kv_scales[layer_idx, 0], self.kv_scales[layer_idx, 1]
        _rotate(q, k, positions, self.cos_sin_cache)
        write_kv_fp8(k, v, k_cache, v_cache, self.meta.slot_mapping, k_scale, v_scale)
        k_read, v_read, tables = dequantize_blocks(k_cache, v_cache, self.meta.block_tables, k_scale, v_scale,
                                                   q.dtype)
        return self.attend(q, k_read, v_read, tables, self.windows[layer_idx])
