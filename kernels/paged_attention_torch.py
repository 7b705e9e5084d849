"""Paged attention in batched torch ops: the engine's CPU path (decode, prefill and mixed batches).

The `*_ref` functions of paged_attention_decode / paged_attention_prefill loop over sequences in
Python and stay the simple references the Triton kernels are tested against. This module computes
the same result for a whole step in a few torch calls per layer, which is what makes the CPU engine
faster than Hugging Face `generate` (benchmarks/__main__.py).

Per step, `plan_paged_attention` turns the attention metadata into index tensors once; every layer
then runs `paged_attention_torch` with them:
  1. one `index_select` gathers each sequence's keys (and values) from the paged cache into a padded
     [B, S, Hkv, D] tensor;
  2. queries are padded to [B, Hq, Q, D] (decode rows: a view, no copy);
  3. `scaled_dot_product_attention` with an additive mask [B, 1, Q, S] that hides the padding keys
     and the causally future ones, GQA by `enable_gqa`;
  4. the real rows are copied back to the packed [N, Hq, D] output.

Decode rows (one new token) and chunks of several tokens are planned as two groups, so one long
prompt in a batch of decode rows does not pad every decode row to the prompt's length.

A sliding-window layer has a plan of its own (`window`): each sequence gathers only the keys from its
first query's window on, so S is at most window + Q - 1, and the mask also hides keys that have left
a query's window.

Keys past a sequence's end are gathered from its first slot and masked out: the kernel contract lets
block-table entries past a sequence's blocks and unwritten cache slots hold anything (NaN included),
and NaN times a zero softmax weight would still be NaN.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class _Group:
    """Sequences attended together, their queries padded to q_len and keys to seq_len."""

    q_rows: torch.Tensor | None  # [G * Q] int64 rows of the packed q (padding repeats a real row); None: q itself
    key_slots: torch.Tensor  # [G * S] int64 flat cache slots (keys past a sequence's end: its first key's)
    mask: torch.Tensor  # [G, 1, Q, S] additive: 0 where the query sees the key, -inf elsewhere
    out_rows: torch.Tensor | None  # [R] packed output rows of the group's real queries; None: all, in order
    real: torch.Tensor | None  # [R] positions of those queries among the G * Q padded ones; None: all
    num_seqs: int
    q_len: int
    seq_len: int


@dataclass
class PagedAttentionPlan:
    """Index tensors of one step's attention, shared by every layer (see plan_paged_attention)."""

    groups: list[_Group]
    num_rows: int  # N, rows of the packed q
    zero_rows: bool  # some rows get no group (seq_len 0, or past cu_seqlens_q[B]): output starts at 0


def plan_paged_attention(block_tables: torch.Tensor, seq_lens: torch.Tensor, cu_seqlens_q: torch.Tensor,
                         block_size: int, num_rows: int, dtype: torch.dtype,
                         window: int | None = None) -> PagedAttentionPlan:
    """The plan of a step whose packed q has num_rows rows (decode: cu_seqlens_q = 0..B).

    block_tables [B, W] int32, seq_lens [B] int32, cu_seqlens_q [B+1] int32 as in kernels/README.md;
    reads seq_lens and cu_seqlens_q on the host. dtype: the mask's (q's) dtype. window: the layers'
    sliding window (a query at p sees keys p - window + 1 .. p); None: every key up to p.
    """
    seq_lens_l = seq_lens.tolist()
    cu = cu_seqlens_q.tolist()
    q_lens = [b - a for a, b in zip(cu, cu[1:])]
    for b, (q_len, seq_len) in enumerate(zip(q_lens, seq_lens_l)):
        if seq_len < q_len and seq_len > 0:
            raise ValueError(f"sequence {b}: seq_len {seq_len} < q_len {q_len}")
    # A sequence with no keys (decode padding) or no queries gets no group; its rows stay zero.
    decode = [b for b, (q, s) in enumerate(zip(q_lens, seq_lens_l)) if q == 1 and s > 0]
    chunks = [b for b, (q, s) in enumerate(zip(q_lens, seq_lens_l)) if q > 1 and s > 0]
    groups = [_plan_group(seqs, block_tables, seq_lens_l, q_lens, cu, block_size, dtype, window)
              for seqs in (decode, chunks) if seqs]
    covered = sum(q_lens[b] for seqs in (decode, chunks) for b in seqs)
    if len(groups) == 1 and covered == num_rows and groups[0].real is None:
        g = groups[0]
        if bool((g.out_rows == torch.arange(num_rows, device=g.out_rows.device)).all()):
            g.q_rows = g.out_rows = None  # the group's rows are q's rows, in order: no gather, no scatter
    return PagedAttentionPlan(groups, num_rows, zero_rows=covered < num_rows)


def _plan_group(seqs: list[int], block_tables: torch.Tensor, seq_lens: list[int], q_lens: list[int],
                cu: list[int], block_size: int, dtype: torch.dtype, window: int | None) -> _Group:
    device = block_tables.device
    q_len = max(q_lens[b] for b in seqs)
    # Each sequence's keys from `first` on: 0, or where its first query's window starts.
    firsts = [0 if window is None else max(0, seq_lens[b] - q_lens[b] - window + 1) for b in seqs]
    seq_len = max(seq_lens[b] - f for b, f in zip(seqs, firsts))
    idx = torch.tensor(seqs, dtype=torch.int64, device=device)
    lens = torch.tensor([seq_lens[b] for b in seqs], dtype=torch.int64, device=device)[:, None]  # [G, 1]
    qlens = torch.tensor([q_lens[b] for b in seqs], dtype=torch.int64, device=device)[:, None]
    starts = torch.tensor([cu[b] for b in seqs], dtype=torch.int64, device=device)[:, None]
    first = torch.tensor(firsts, dtype=torch.int64, device=device)[:, None]
    key_pos = first + torch.arange(seq_len, device=device)[None, :]  # [G, S]
    exists = key_pos < lens
    gather_pos = torch.where(exists, key_pos, first)  # past the end -> the first key
    tables = block_tables.index_select(0, idx).long()
    key_slots = tables.gather(1, gather_pos // block_size) * block_size + gather_pos % block_size  # [G, S]
    j = torch.arange(q_len, device=device)[None, :]  # [1, Q]
    is_real = j < qlens  # [G, Q]
    j_clamped = torch.minimum(j, qlens - 1)  # a padding query repeats the last real one
    query_pos = lens - qlens + j_clamped  # [G, Q] absolute positions
    visible = key_pos[:, None, :] <= query_pos[:, :, None]  # [G, Q, S]; keys past the end are past every query
    if window is not None:
        visible &= key_pos[:, None, :] > query_pos[:, :, None] - window
    mask = torch.zeros(visible.shape, dtype=dtype, device=device).masked_fill_(~visible, float("-inf"))
    rows = (starts + j_clamped).flatten()
    real = is_real.flatten().nonzero().squeeze(1)
    all_real = real.numel() == rows.numel()
    return _Group(
        q_rows=rows,
        key_slots=key_slots.flatten(),
        mask=mask[:, None],
        out_rows=rows if all_real else rows.index_select(0, real),
        real=None if all_real else real,
        num_seqs=len(seqs),
        q_len=q_len,
        seq_len=seq_len,
    )


def _gather(cache_flat: torch.Tensor, slots: torch.Tensor, scale: torch.Tensor | None, dtype: torch.dtype):
    """Rows `slots` of a flattened cache; from an e4m3 cache, in `dtype` and times its scale (only the
    step's keys are converted)."""
    if scale is None:
        return cache_flat.index_select(0, slots)
    # Through a uint8 view: index_select does not cover the float8 dtypes on every device.
    rows = cache_flat.view(torch.uint8).index_select(0, slots).view(cache_flat.dtype)
    return rows.to(dtype) * scale.to(dtype)


def paged_attention_torch(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                          plan: PagedAttentionPlan, scale: float, k_scale: torch.Tensor | None = None,
                          v_scale: torch.Tensor | None = None) -> torch.Tensor:
    """q [N, Hq, D] (last dim contiguous), k_cache / v_cache [num_blocks, block_size, Hkv, D]
    contiguous -> [N, Hq, D] in q's dtype; the same values as paged_attention_prefill_ref (and, for
    one query per sequence, paged_attention_decode_ref). Rows no sequence owns are zero. An e4m3
    cache holds K / k_scale and V / v_scale (k_scale, v_scale: fp32 tensors of one element)."""
    num_q_heads, head_dim = q.shape[1], q.shape[2]
    num_kv_heads = k_cache.shape[2]
    k_flat = k_cache.view(-1, num_kv_heads * head_dim)
    v_flat = v_cache.view(-1, num_kv_heads * head_dim)
    out = None
    if plan.zero_rows or len(plan.groups) > 1 or plan.groups[0].out_rows is not None:
        out = q.new_zeros(plan.num_rows, num_q_heads, head_dim)
    for g in plan.groups:
        # [G, S, Hkv, D] -> [G, Hkv, S, D] (a view: SDPA takes the strides)
        k = _gather(k_flat, g.key_slots, k_scale, q.dtype).view(g.num_seqs, g.seq_len, num_kv_heads, head_dim).transpose(1, 2)
        v = _gather(v_flat, g.key_slots, v_scale, q.dtype).view(g.num_seqs, g.seq_len, num_kv_heads, head_dim).transpose(1, 2)
        qg = q if g.q_rows is None else q.index_select(0, g.q_rows)
        qg = qg.view(g.num_seqs, g.q_len, num_q_heads, head_dim).transpose(1, 2)  # [G, Hq, Q, D]
        o = F.scaled_dot_product_attention(qg, k, v, attn_mask=g.mask, scale=scale,
                                           enable_gqa=num_q_heads != num_kv_heads)
        o = o.transpose(1, 2).reshape(g.num_seqs * g.q_len, num_q_heads, head_dim)  # [G * Q, Hq, D]
        if out is None:
            return o
        if g.real is not None:
            o = o.index_select(0, g.real)
        out.index_copy_(0, g.out_rows, o)
    return out
