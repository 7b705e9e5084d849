"""Pagoda's Triton kernels: RoPE fused with the paged KV cache write, paged attention (decode and prefill), RMSNorm,
SiLU-and-multiply, the fused mixture-of-experts MLP, and the unpacking of a captured step's staged inputs.

Each kernel family lives in one module with its launcher and a pure-torch `*_ref`, the simple
reference the kernel is tested against; paged_attention_torch is the engine's batched CPU attention. The launchers need CUDA tensors (or TRITON_INTERPRET=1 for CPU testing) and never sync the host.
"""

from kernels.activation import silu_and_mul, silu_and_mul_ref
from kernels.fused_moe import fused_moe, fused_moe_ref, moe_align
from kernels.kv_cache_write import write_kv_cache_ref
from kernels.paged_attention_decode import (
    DecodeConfig,
    choose_num_splits,
    paged_attention_decode,
    paged_attention_decode_ref,
)
from kernels.paged_attention_prefill import PrefillConfig, paged_attention_prefill, paged_attention_prefill_ref
from kernels.paged_attention_prefill_split import choose_prefill_splits, paged_attention_prefill_split
from kernels.paged_attention_torch import PagedAttentionPlan, paged_attention_torch, plan_paged_attention
from kernels.rmsnorm import rms_norm, rms_norm_ref
from kernels.rotary import (
    apply_rotary,
    apply_rotary_and_write_kv,
    apply_rotary_and_write_kv_ref,
    apply_rotary_ref,
    build_cos_sin_cache,
    rope_inv_freq,
)
from kernels.step_row import unpack_step_row, unpack_step_row_ref

__all__ = [
    "DecodeConfig",
    "PagedAttentionPlan",
    "PrefillConfig",
    "apply_rotary",
    "apply_rotary_and_write_kv",
    "apply_rotary_and_write_kv_ref",
    "apply_rotary_ref",
    "build_cos_sin_cache",
    "choose_num_splits",
    "choose_prefill_splits",
    "fused_moe",
    "fused_moe_ref",
    "moe_align",
    "paged_attention_decode",
    "paged_attention_decode_ref",
    "paged_attention_prefill",
    "paged_attention_prefill_ref",
    "paged_attention_prefill_split",
    "paged_attention_torch",
    "plan_paged_attention",
    "rms_norm",
    "rms_norm_ref",
    "rope_inv_freq",
    "silu_and_mul",
    "silu_and_mul_ref",
    "unpack_step_row",
    "unpack_step_row_ref",
    "write_kv_cache_ref",
]
