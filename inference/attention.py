"""Per-step attention metadata and the forward context that routes attention to the paged kernels."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from . import ops


@dataclass
class AttentionMetadata:
    """Where this step's tokens go in the KV cache and which keys each query sees."""

    slot_mapping: torch.Tensor  # [N] int64: cache slot of each new token (-1 = padding)
    block_tables: torch.Tensor  # [B, max_blocks] int32: each sequence's blocks
    seq_lens: torch.Tensor  # [B] int32: keys per sequence, this step's tokens included
    cu_seqlens_q: torch.Tensor  # [B+1] int32: offsets of each sequence's new tokens in the batch
    max_q_len: int
    max_seq_len: int
    decode_only: bool  # every sequence adds exactly one token: the decode kernel serves them


class StepContext:
    """The ForwardContext of one step: KV caches, metadata and rotary tables.

    windows: each layer's sliding window (None: global), e.g. ModelArgs.layer_windows(); None: every
    layer global. A window no sequence of the step can exceed (>= meta.max_seq_len, which a CUDA graph
    sets to the model's max length) is run as global: the same keys, without the window's masks.
    kv_scales: [num_layers, 2] fp32, each layer's (k_scale, v_scale) when the caches are e4m3 (they
    store K / k_scale and V / v_scale; the kernels read them on the device); None for float caches.
    """

    def __init__(self, kv_caches: list[tuple[torch.Tensor, torch.Tensor]], meta: AttentionMetadata,
                 cos_sin_cache: torch.Tensor, scale: float, windows: Sequence[int | None] | None = None,
                 kv_scales: torch.Tensor | None = None):
        self.kv_caches = kv_caches
        self.kv_scales = kv_scales
        self.meta = meta
        self.cos_sin_cache = cos_sin_cache
        self.scale = scale
        self.windows = [w if w is not None and w < meta.max_seq_len else None
                        for w in (windows or [None] * len(kv_caches))]
        # Per window (the same for every layer of a step that has it): the split-KV choice and the
        # torch path's indices.
        self._prefill_splits: dict[int | None, int] = {}
        self._batched_plans: dict[int | None, ops.PagedAttentionPlan] = {}

    def attention(self, layer_idx: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  positions: torch.Tensor) -> torch.Tensor:
        k_cache, v_cache = self.kv_caches[layer_idx]
        meta = self.meta
        # one-element views: the kernels load the scales, so a captured graph reads the current ones
        k_scale, v_scale = (None, None) if self.kv_scales is None else (
            self.kv_scales[layer_idx, 0:1], self.kv_scales[layer_idx, 1:2])
        ops.rotary_and_write_kv(q, k, v, positions, self.cos_sin_cache, k_cache, v_cache, meta.slot_mapping,
                                k_scale, v_scale)
        return self.attend(q, k_cache, v_cache, meta.block_tables, self.windows[layer_idx], k_scale, v_scale)

    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
               block_tables: torch.Tensor, window: int | None = None, k_scale: torch.Tensor | None = None,
               v_scale: torch.Tensor | None = None) -> torch.Tensor:
        """Attend q [N, Hq, D] over the caches through block_tables (this step's K/V already written);
        window: the layer's sliding window (None: every earlier key); k_scale, v_scale: an e4m3
        cache's."""
        meta = self.meta
        if not ops.uses_triton(q):  # the CPU path: the whole step in a few batched torch ops
            plan = self.batched_plan(q, k_cache, block_tables, window)
            return ops.paged_attention_batched(q, k_cache, v_cache, plan, self.scale, k_scale, v_scale)
        if meta.decode_only:
            return ops.paged_attention_decode(q, k_cache, v_cache, block_tables, meta.seq_lens,
                                              self.scale, meta.max_seq_len, window, k_scale, v_scale)
        # The split count comes from host ints only, so a CUDA graph captured with max_seq_len = the
        # model's max length stays valid at replay.
        return ops.paged_attention_prefill(q, k_cache, v_cache, block_tables, meta.cu_seqlens_q,
                                           meta.seq_lens, self.scale, meta.max_q_len,
                                           self.prefill_splits(q, k_cache, window), max_seq_len=meta.max_seq_len,
                                           window=window, k_scale=k_scale, v_scale=v_scale)

    def batched_plan(self, q: torch.Tensor, k_cache: torch.Tensor, block_tables: torch.Tensor,
                     window: int | None = None) -> ops.PagedAttentionPlan:
        """The torch path's gather indices and masks for this step's layers of one window (built by the
        first of them; every layer of a step reads the same blocks)."""
        if window not in self._batched_plans:
            meta = self.meta
            self._batched_plans[window] = ops.plan_batched_attention(
                block_tables, meta.seq_lens, meta.cu_seqlens_q, k_cache.shape[1], q.shape[0], q.dtype, window)
        return self._batched_plans[window]

    def prefill_splits(self, q: torch.Tensor, k_cache: torch.Tensor, window: int | None = None) -> int:
        """Key splits of the prefill attention for this step's layers of one window; 1 = unsplit."""
        if window not in self._prefill_splits:
            meta = self.meta
            self._prefill_splits[window] = ops.prefill_splits(q, k_cache, meta.seq_lens.shape[0], meta.max_q_len,
                                                              meta.max_seq_len, window)
        return self._prefill_splits[window]
