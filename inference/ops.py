"""The model's small ops, each sent to the Triton kernel on CUDA and to its torch reference elsewhere."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import kernels
from kernels.rotary import build_cos_sin_cache  # noqa: F401  (re-exported for the model runner)

# Tests set this (with TRITON_INTERPRET=1) to run the Triton launchers on CPU tensors through the
# whole model, so the engine's use of every kernel is checked without a GPU.
TRITON_ON_CPU = False


def _triton(t: torch.Tensor) -> bool:
    return t.is_cuda or TRITON_ON_CPU


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None):
    if _triton(x):
        return kernels.rms_norm(x, weight, eps, residual)
    return kernels.rms_norm_ref(x, weight, eps, residual)


def rotary(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor):
    """Rotate q [N, Hq, D] and k [N, Hkv, D] by their positions; returns (q, k)."""
    if _triton(q):
        kernels.apply_rotary(q, k, positions, cos_sin_cache)  # in place, on views of the qkv output
        return q, k
    return kernels.apply_rotary_ref(q, k, positions, cos_sin_cache)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up


def write_kv_cache(k, v, k_cache, v_cache, slot_mapping) -> None:
    if _triton(k):
        kernels.write_kv_cache(k, v, k_cache, v_cache, slot_mapping)
    else:
        kernels.write_kv_cache_ref(k, v, k_cache, v_cache, slot_mapping)


def paged_attention_decode(q, k_cache, v_cache, block_tables, seq_lens, scale, max_seq_len):
    if _triton(q):
        return kernels.paged_attention_decode(q, k_cache, v_cache, block_tables, seq_lens, scale,
                                              max_seq_len=max_seq_len)
    return kernels.paged_attention_decode_ref(q, k_cache, v_cache, block_tables, seq_lens, scale)


def paged_attention_prefill(q, k_cache, v_cache, block_tables, cu_seqlens_q, seq_lens, scale, max_q_len):
    if _triton(q):
        return kernels.paged_attention_prefill(q, k_cache, v_cache, block_tables, cu_seqlens_q, seq_lens,
                                               scale, max_q_len)
    return kernels.paged_attention_prefill_ref(q, k_cache, v_cache, block_tables, cu_seqlens_q, seq_lens,
                                               scale, max_q_len)
