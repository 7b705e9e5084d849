"""Helpers shared by the paged attention kernels (Triton ones are inlined into the callers) and their
launchers."""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634  # softmax runs in base 2: exp(x * scale) == exp2(x * scale * LOG2E)


@triton.jit
def paged_kv_tile_offsets(
    block_table_row_ptr,  # [max_blocks_per_seq] int32, this sequence's row of block_tables
    pos,  # [BLOCK_N] int32 key positions within the sequence
    mask,  # [BLOCK_N] keys that exist; other rows are neither looked up nor loaded
    kv_head_off,  # int64 scalar: kv_head * stride_cache_head
    stride_cache_block,
    stride_cache_slot,
    BLOCK_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    """Element offsets [BLOCK_N, HEAD_DIM] of keys `pos` in a [num_blocks, block_size, Hkv, D] cache.

    A tile of keys may span several cache blocks: each key looks up its own block id. The block id is
    widened to int64 first because block_id * stride_cache_block overflows int32 in large pools.
    """
    block_ids = tl.load(block_table_row_ptr + pos // BLOCK_SIZE, mask=mask, other=0)
    return kv_slot_offsets(block_ids, pos, kv_head_off, stride_cache_block, stride_cache_slot, BLOCK_SIZE, HEAD_DIM)


@triton.jit
def kv_slot_offsets(
    block_ids, pos, kv_head_off, stride_cache_block, stride_cache_slot, BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr
):
    """Element offsets [BLOCK_N, HEAD_DIM] of keys pos [BLOCK_N] held in cache blocks block_ids [BLOCK_N]."""
    row = block_ids.to(tl.int64) * stride_cache_block + (pos % BLOCK_SIZE).to(tl.int64) * stride_cache_slot + kv_head_off
    return row[:, None] + tl.arange(0, HEAD_DIM)[None, :]


@triton.jit
def visible_keys(pos, mask_n, query_pos, window, SLIDING: tl.constexpr):
    """[M, N]: key pos [N] exists (mask_n) and the row at query_pos [M] sees it: causally, and in a
    sliding layer only within (query_pos - window, query_pos]."""
    visible = (pos[None, :] <= query_pos[:, None]) & mask_n[None, :]
    if SLIDING:
        visible = visible & (pos[None, :] > query_pos[:, None] - window)
    return visible


@triton.jit
def online_softmax_weights(s, m_i, l_i, MAYBE_UNSEEN: tl.constexpr):
    """One tile's online-softmax step before its values: scores s [M, N] (log2 domain, -inf where
    unseen) against the running max m_i and sum l_i [M]. Returns p [M, N], alpha [M] (the factor of the
    accumulator so far), the new max and the new sum; the caller adds p @ v to acc * alpha.

    MAYBE_UNSEEN: some row may have seen no key yet (all -inf: a masked tile of a split's range, or one
    before a row's sliding window); its max stays -inf but 0 is subtracted instead, so alpha and p are
    0, not NaN. Without it, every row must see a key of the first tile (key 0, or its own)."""
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    if MAYBE_UNSEEN:
        m_sub = tl.where(m_new > float("-inf"), m_new, 0.0)
    else:
        m_sub = m_new
    alpha = tl.exp2(m_i - m_sub)
    p = tl.exp2(s - m_sub[:, None])
    return p, alpha, m_new, l_i * alpha + tl.sum(p, axis=1)


def paged_strides(q: torch.Tensor, out: torch.Tensor, block_tables: torch.Tensor, k_cache: torch.Tensor) -> tuple:
    """The strides every paged attention kernel takes, in its parameters' order: q's and out's token and
    head strides, block_tables' row stride, and the cache's block, slot and head strides."""
    return (q.stride(0), q.stride(1), out.stride(0), out.stride(1), block_tables.stride(0),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2))


def split_partials(rows: int, num_q_heads: int, num_splits: int, head_dim: int, out: torch.Tensor):
    """The fp32 partials (acc [rows, Hq, S, D], max and sum [rows, Hq, S]) a split kernel writes for its
    merge, from the caching allocator; with one split none are written, and `out` stands in for all three."""
    if num_splits == 1:
        return out, out, out
    part_acc = torch.empty(rows, num_q_heads, num_splits, head_dim, dtype=torch.float32, device=out.device)
    part_max = torch.empty(rows, num_q_heads, num_splits, dtype=torch.float32, device=out.device)
    part_sum = torch.empty(rows, num_q_heads, num_splits, dtype=torch.float32, device=out.device)
    return part_acc, part_max, part_sum


@triton.jit
def split_key_range(seq_len, split, num_splits, BLOCK_N: tl.constexpr):
    """Keys [lo, hi) of split `split` of a sequence's seq_len keys: its BLOCK_N-key tiles dealt out to
    the num_splits ranges as evenly as whole tiles allow (the first ranges take one tile more); a range
    past the last tile is empty (lo == hi). Rounding every range up to whole tiles instead leaves the
    last ranges short or empty: 2,050 keys in 8 splits gave 7 ranges of 5 tiles and an empty one, so
    an eighth of the programs idled while the SMs that held two busy ones set the pace (H200, a chat
    turn's split prefill: 16.6 -> 15.4 us a layer). The decode kernel still rounds each range up: the
    same change there was 1.3-6.5% slower at batch 1-16 and equal at 64-256, even where the ranges
    come out the same (H100, docs/BENCHMARKS.md), so it was not taken."""
    num_tiles = tl.cdiv(seq_len, BLOCK_N)
    base = num_tiles // num_splits
    extra = num_tiles % num_splits
    lo = (split * base + tl.minimum(split, extra)) * BLOCK_N
    hi = tl.minimum(lo + (base + (split < extra).to(tl.int32)) * BLOCK_N, seq_len)
    return tl.minimum(lo, seq_len), hi


@triton.jit
def merge_split_partials(
    part_acc_ptr,  # [rows, Hq, num_splits, D] fp32: unnormalised sum of p * v per split
    part_max_ptr,  # [rows, Hq, num_splits] fp32: the split's max log2-domain score (-inf: it saw no key)
    part_sum_ptr,  # [rows, Hq, num_splits] fp32: the split's sum of exp2(score - max)
    row0,  # int64 index of split 0 of this (row, head)
    num_splits,
    HEAD_DIM: tl.constexpr,
    BLOCK_S: tl.constexpr,  # num_splits padded to a power of two
):
    """The split-KV merge of one (row, query head): sum_s w_s acc_s / sum_s w_s l_s, w_s = 2^(m_s - max).

    A split that saw no key has max -inf and weight 0; its sum and acc may be unwritten (the kernel
    that wrote the partials skips them), so they are selected away after loading: the three loads are
    issued together instead of the sum and acc waiting for the max. Returns the [HEAD_DIM] fp32 output.
    """
    offs_s = tl.arange(0, BLOCK_S)
    exists = offs_s < num_splits
    offs_d = tl.arange(0, HEAD_DIM)
    m = tl.load(part_max_ptr + row0 + offs_s, mask=exists, other=float("-inf"))  # [BLOCK_S]
    l = tl.load(part_sum_ptr + row0 + offs_s, mask=exists, other=0.0)
    acc = tl.load(
        part_acc_ptr + (row0 + offs_s[:, None]) * HEAD_DIM + offs_d[None, :], mask=exists[:, None], other=0.0
    )  # [BLOCK_S, D]
    return combine_splits(m, l, acc, 0)


@triton.jit
def combine_splits(m, l, acc, AXIS: tl.constexpr):
    """sum_s w_s acc_s / sum_s w_s l_s, w_s = 2^(m_s - max), over the splits axis AXIS of the loaded
    partials m, l [..., S] and acc [..., S, D] -> [..., D]. Splits with max -inf (no key) weigh 0, and
    their sum and acc, possibly never written (NaN), are selected away."""
    live = m > float("-inf")
    m_max = tl.max(m, axis=AXIS, keep_dims=True)
    m_max = tl.where(m_max > float("-inf"), m_max, 0.0)  # every split empty: all weights 0
    w = tl.where(live, tl.exp2(m - m_max), 0.0)
    denom = tl.sum(tl.where(live, w * l, 0.0), axis=AXIS, keep_dims=True)
    acc = tl.where(tl.expand_dims(live, AXIS + 1), acc, 0.0)
    return tl.sum(acc * tl.expand_dims(w, AXIS + 1), axis=AXIS) / tl.where(denom > 0.0, denom, 1.0)
