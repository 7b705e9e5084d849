"""The model's small ops, each sent to the Triton kernel on CUDA and to torch elsewhere (the references,
and for attention the batched torch path of kernels/paged_attention_torch.py)."""
from __future__ import annotations

import torch

import kernels
from kernels.paged_attention_torch import PagedAttentionPlan
from kernels.rotary import build_cos_sin_cache  # noqa: F401  (re-exported for the model runner)

# Tests set this (with TRITON_INTERPRET=1) to run the Triton launchers on CPU tensors through the
# whole model, so the engine's use of every kernel is checked without a GPU.
TRITON_ON_CPU = False


def _triton(t: torch.Tensor) -> bool:
    return t.is_cuda or TRITON_ON_CPU


def uses_triton(t: torch.Tensor) -> bool:
    """Whether ops on tensors like t run the Triton kernels (else torch: the CPU path)."""
    return _triton(t)


def can_pack_linear(weight: torch.Tensor) -> bool:
    """Whether linear_packed can run this weight: fp32 on a CPU with oneDNN."""
    return weight.device.type == "cpu" and weight.dtype == torch.float32 and torch.backends.mkldnn.is_available()


def pack_linear_weight(weight: torch.Tensor) -> torch.Tensor:
    """oneDNN's blocked copy of an fp32 [out, in] CPU weight, for linear_packed. MKL's sgemm re-packs
    the weight on every call, which at decode's 1-64 rows costs as much as the product: packed once,
    a SmolLM2 decode step of 16 rows ran its projections 25-35% faster and its lm_head 2.3x (2-core
    AMD EPYC, one thread: 25.1 -> 10.7 ms)."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None)


def linear_packed(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [N, in] @ W^T (+ bias) with W packed by pack_linear_weight -> [N, out]."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None):
    if _triton(x):
        return kernels.rms_norm(x, weight, eps, residual)
    return kernels.rms_norm_ref(x, weight, eps, residual)


def rotary_and_write_kv(q, k, v, positions, cos_sin_cache, k_cache, v_cache, slot_mapping,
                        k_scale=None, v_scale=None) -> None:
    """Rotate q [N, Hq, D] and k [N, Hkv, D] in place by their positions, then write k and v into the
    paged cache at slot_mapping (-1: padding, not written); an e4m3 cache stores them divided by
    k_scale / v_scale. One kernel on CUDA."""
    if _triton(q):
        kernels.apply_rotary_and_write_kv(q, k, v, positions, cos_sin_cache, k_cache, v_cache, slot_mapping,
                                          k_scale, v_scale)
    else:
        kernels.apply_rotary_and_write_kv_ref(q, k, v, positions, cos_sin_cache, k_cache, v_cache, slot_mapping,
                                              k_scale, v_scale)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    if _triton(x):
        return kernels.silu_and_mul(x)
    return kernels.silu_and_mul_ref(x)


def paged_attention_decode(q, k_cache, v_cache, block_tables, seq_lens, scale, max_seq_len,
                           window: int | None = None, k_scale=None, v_scale=None):
    if _triton(q):
        return kernels.paged_attention_decode(q, k_cache, v_cache, block_tables, seq_lens, scale,
                                              max_seq_len=max_seq_len, window=window, k_scale=k_scale,
                                              v_scale=v_scale)
    return kernels.paged_attention_decode_ref(q, k_cache, v_cache, block_tables, seq_lens, scale, window=window,
                                              k_scale=k_scale, v_scale=v_scale)


def prefill_splits(q, k_cache, num_seqs: int, max_q_len: int, max_seq_len: int, window: int | None = None) -> int:
    """Key splits for a prefill step's attention (host ints only); 1 on the torch reference path."""
    if not _triton(q):
        return 1
    return kernels.choose_prefill_splits(num_seqs, q.shape[1], k_cache.shape[2], q.shape[2], q.dtype, max_q_len,
                                         max_seq_len, q.device, window=window)


def paged_attention_prefill(q, k_cache, v_cache, block_tables, cu_seqlens_q, seq_lens, scale, max_q_len,
                            num_splits: int = 1, max_seq_len: int | None = None, window: int | None = None,
                            k_scale=None, v_scale=None):
    if _triton(q):
        if num_splits > 1:
            # Few new tokens over a long context (a chat turn after a cached prefix): the key range is
            # split across programs so the whole GPU works on it.
            return kernels.paged_attention_prefill_split(q, k_cache, v_cache, block_tables, cu_seqlens_q, seq_lens,
                                                         scale, max_q_len, num_splits, max_seq_len=max_seq_len,
                                                         window=window, k_scale=k_scale, v_scale=v_scale)
        return kernels.paged_attention_prefill(q, k_cache, v_cache, block_tables, cu_seqlens_q, seq_lens,
                                               scale, max_q_len, window=window, k_scale=k_scale, v_scale=v_scale)
    return kernels.paged_attention_prefill_ref(q, k_cache, v_cache, block_tables, cu_seqlens_q, seq_lens,
                                               scale, max_q_len, window=window, k_scale=k_scale, v_scale=v_scale)


def plan_batched_attention(block_tables, seq_lens, cu_seqlens_q, block_size: int, num_rows: int,
                           dtype: torch.dtype, window: int | None = None) -> PagedAttentionPlan:
    """A step's index tensors for paged_attention_batched, built once and shared by every layer of
    one window."""
    return kernels.plan_paged_attention(block_tables, seq_lens, cu_seqlens_q, block_size, num_rows, dtype, window)


def paged_attention_batched(q, k_cache, v_cache, plan: PagedAttentionPlan, scale: float,
                            k_scale=None, v_scale=None) -> torch.Tensor:
    """Decode, prefill and mixed rows of a step in a few batched torch ops (the CPU path; any device)."""
    return kernels.paged_attention_torch(q, k_cache, v_cache, plan, scale, k_scale, v_scale)


def unpack_step_row(row, positions, slots, seq_lens, cu_seqlens_q, block_table, last_index, max_rows: int,
                    block_size: int) -> None:
    """A captured prefill step's inputs from its staged row (see kernels/step_row.py)."""
    if _triton(row):
        kernels.unpack_step_row(row, positions, slots, seq_lens, cu_seqlens_q, block_table, last_index, max_rows,
                                block_size)
    else:
        kernels.unpack_step_row_ref(row, positions, slots, seq_lens, cu_seqlens_q, block_table, last_index,
                                    max_rows, block_size)


def fused_moe(x, w13, w2, topk_weights, topk_ids):
    """x [N, H] through each token's top-k experts (kernels/fused_moe.py) -> [N, H]."""
    if _triton(x):
        return kernels.fused_moe(x, w13, w2, topk_weights, topk_ids)
    return kernels.fused_moe_ref(x, w13, w2, topk_weights, topk_ids)
