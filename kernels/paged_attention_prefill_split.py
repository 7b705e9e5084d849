"""Split-KV paged attention for prefill (`paged_attention_prefill_split`), for chunks of few queries
over long contexts, e.g. a chat turn of 50 new tokens after 2,000 cached ones. The unsplit kernel
(paged_attention_prefill.py) launches only (tiles x Hkv) programs there (24 on an 8B shape), each walking all 2,050 keys, so most SMs idle. The split kernel
uses the same tiles (tokens x GQA group in M) but also cuts every sequence's key range into
`num_splits` parts: grid (q_tile, kv_head, split, seq) flattened into one axis, q_tile fastest, so the
programs that share a K/V range run side by side (L2 reuse). Each writes fp32 partials (acc, max, sum)
per (token, head, split) and `_prefill_merge_kernel` combines them, as decode's merge does. In a
sliding-window layer only the keys some query of the sequence sees are split, and each tile walks
only those of its own rows' windows.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._checks import num_sms
from kernels._paged import (
    LOG2E,
    combine_splits,
    kv_slot_offsets,
    online_softmax_weights,
    paged_kv_tile_offsets,
    paged_strides,
    split_key_range,
    split_partials,
    visible_keys,
)
from kernels.paged_attention_prefill import PrefillConfig, _load_query_tile, _store_out_tile, check_prefill_inputs

SPLIT_MAX_Q_LEN = 128  # longer chunks have enough query tiles for the kernel above (and PrefillGraphs' top size)
SPLIT_MAX_SPLITS = 64
SPLIT_MIN_KEYS = 128  # keys per split below which the merge costs more than the parallelism gains
SPLIT_PROGRAMS_PER_SM = 2  # target programs per SM (K/V tiles + q of a 64-row tile: 2 fit an SM)
MERGE_HEADS = 4  # query heads per merge program


def prefill_split_config(head_dim: int, dtype: torch.dtype, gqa_pad: int, max_q_len: int) -> PrefillConfig:
    """Tiles of at most 64 rows (tokens x padded GQA group): parallelism comes from the key splits."""
    element_size = torch.finfo(dtype).bits // 8
    rows = triton.next_power_of_2(max(1, gqa_pad * max(1, max_q_len)))
    block_m = max(gqa_pad, 16, min(64, rows))
    block_n = 32 if element_size * head_dim > 256 else 64  # fp32 D=128 or D=256: smaller K/V tiles
    # One stage: the kernel prefetches its next K/V tile into registers itself. Triton's pipeliner
    # instead (a plain loop, cp.async through shared memory) measured slower on an H200: 18.8 (2
    # stages) and 19.7 (3) against 16.5 us per layer with the merge (python -m benchmarks.kernels --only prefix).
    return PrefillConfig(block_m=block_m, block_n=block_n, num_warps=4, num_stages=1)


def choose_prefill_splits(
    batch: int,
    num_q_heads: int,
    num_kv_heads: int,
    head_dim: int,
    dtype: torch.dtype,
    max_q_len: int,
    max_seq_len: int,
    device: torch.device,
    config: PrefillConfig | None = None,
    window: int | None = None,
) -> int:
    """Key splits for `paged_attention_prefill_split`; 1 means the unsplit kernel is the better choice.

    Host ints only (no sync). Splits until there are ~SPLIT_PROGRAMS_PER_SM programs per SM (rounded
    down, so the programs fit one wave), keeping >= SPLIT_MIN_KEYS keys of `max_seq_len` per split
    (with a sliding window, of the window + max_q_len - 1 keys a sequence's queries see at most).
    Chunks longer than SPLIT_MAX_Q_LEN, or batches with enough query tiles already, get 1.
    """
    if window is not None:
        max_seq_len = min(max_seq_len, window + max_q_len - 1)
    if batch <= 0 or max_q_len <= 0 or max_q_len > SPLIT_MAX_Q_LEN:
        return 1
    gqa_pad = triton.next_power_of_2(num_q_heads // num_kv_heads)
    cfg = config or prefill_split_config(head_dim, dtype, gqa_pad, max_q_len)
    q_tiles = triton.cdiv(max_q_len, cfg.block_m // gqa_pad)
    programs = batch * num_kv_heads * q_tiles
    wanted = SPLIT_PROGRAMS_PER_SM * num_sms(device) // programs
    by_length = triton.cdiv(max_seq_len, SPLIT_MIN_KEYS)
    return max(1, min(wanted, by_length, SPLIT_MAX_SPLITS))


@triton.jit
def _full_tile_offsets(
    bt_row_ptr, start, kv_head_off, stride_cache_block, stride_cache_slot,
    BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Cache offsets [BLOCK_N, D] of keys start .. start + BLOCK_N - 1, all of which exist (no mask)."""
    pos = start + tl.arange(0, BLOCK_N)
    block_ids = tl.load(bt_row_ptr + pos // BLOCK_SIZE)
    return kv_slot_offsets(block_ids, pos, kv_head_off, stride_cache_block, stride_cache_slot, BLOCK_SIZE, HEAD_DIM)


@triton.jit
def _online_softmax_update(s, v, acc, m_i, l_i, DOT_PRECISION: tl.constexpr, MAYBE_UNSEEN: tl.constexpr):
    """Fold a tile's scores s [BLOCK_M, BLOCK_N] (log2 domain) and values v into (acc, max, sum);
    MAYBE_UNSEEN as in online_softmax_weights."""
    p, alpha, m_new, l_i = online_softmax_weights(s, m_i, l_i, MAYBE_UNSEEN)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
    return acc, m_new, l_i


@triton.jit
def _full_tile_step(q, k, v, acc, m_i, l_i, qk_scale, DOT_PRECISION: tl.constexpr):
    """One online-softmax step over a tile of keys that every row sees (so every max is finite). An
    e4m3 tile is converted to q's dtype here (a no-op for a float cache)."""
    k = k.to(q.dtype)
    v = v.to(q.dtype)
    s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale  # [BLOCK_M, BLOCK_N]
    return _online_softmax_update(s, v, acc, m_i, l_i, DOT_PRECISION, False)


@triton.jit
def _masked_tile_step(
    q,  # [BLOCK_M, D]
    acc,  # [BLOCK_M, D] fp32
    m_i,  # [BLOCK_M] fp32
    l_i,  # [BLOCK_M] fp32
    start,  # first key position of the tile
    hi,  # one past the range's last key
    query_pos,  # [BLOCK_M] absolute positions of the rows
    window,  # SLIDING: the row at p sees keys (p - window, p]
    k_cache_ptr,
    v_cache_ptr,
    bt_row_ptr,
    kv_head_off,
    stride_cache_block,
    stride_cache_slot,
    qk_scale,
    BLOCK_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SLIDING: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """One online-softmax step of the split kernel over keys start .. start + BLOCK_N - 1, of which
    some may not exist (past hi) or not be visible (causal, or before a window) to some rows."""
    pos = start + tl.arange(0, BLOCK_N)
    mask_n = pos < hi
    kv_offs = paged_kv_tile_offsets(
        bt_row_ptr, pos, mask_n, kv_head_off, stride_cache_block, stride_cache_slot, BLOCK_SIZE, HEAD_DIM
    )
    k = tl.load(k_cache_ptr + kv_offs, mask=mask_n[:, None], other=0.0)  # [BLOCK_N, D]
    # Masked V rows load as 0: unused slots may hold anything, even NaN, and 0 * NaN is NaN.
    v = tl.load(v_cache_ptr + kv_offs, mask=mask_n[:, None], other=0.0)  # [BLOCK_N, D]
    k = k.to(q.dtype)  # an e4m3 tile; a no-op for a float cache
    v = v.to(q.dtype)
    s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale  # [BLOCK_M, BLOCK_N]
    s = tl.where(visible_keys(pos, mask_n, query_pos, window, SLIDING), s, float("-inf"))
    return _online_softmax_update(s, v, acc, m_i, l_i, DOT_PRECISION, True)


@triton.jit
def _prefill_split_kernel(
    q_ptr,  # [N, Hq, D]
    k_cache_ptr,  # [num_blocks, block_size, Hkv, D], contiguous
    v_cache_ptr,  # [num_blocks, block_size, Hkv, D], contiguous
    block_tables_ptr,  # [B, max_blocks_per_seq] int32
    cu_seqlens_q_ptr,  # [B + 1] int32
    seq_lens_ptr,  # [B] int32
    out_ptr,  # [N, Hq, D], written only without SPLIT_K
    part_acc_ptr,  # [N, Hq, num_splits, D] fp32: unnormalised sum of p * v
    part_max_ptr,  # [N, Hq, num_splits] fp32: running max of the log2-domain scores (-inf: no key)
    part_sum_ptr,  # [N, Hq, num_splits] fp32: running sum of exp2(score - max)
    k_scale_ptr,  # [1] fp32, FP8_KV only: cached K = e4m3(K / k_scale)
    v_scale_ptr,  # [1] fp32, FP8_KV only
    qk_scale,  # softmax scale * log2(e)
    window,  # SLIDING: the query at p sees keys (p - window, p]
    num_q_heads,
    num_kv_heads,
    num_splits,
    num_q_tiles,  # cdiv(max_q_len, BLOCK_Q): tiles per sequence in the grid
    stride_q_tok,
    stride_q_head,
    stride_out_tok,
    stride_out_head,
    stride_bt_seq,
    stride_cache_block,
    stride_cache_slot,
    stride_cache_head,
    GQA: tl.constexpr,  # query heads per kv head
    GQA_PAD: tl.constexpr,  # next power of two of GQA
    HEAD_DIM: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,  # tokens per kv cache block
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SPLIT_K: tl.constexpr,  # num_splits > 1: write partials for the merge kernel
    SLIDING: tl.constexpr,  # a sliding-window layer (else every earlier key is seen)
    FP8_KV: tl.constexpr,  # e4m3 cache: k_scale folded into qk_scale, v_scale applied to acc once
    DOT_PRECISION: tl.constexpr,
):
    BLOCK_Q: tl.constexpr = BLOCK_M // GQA_PAD  # tokens per tile
    # pid = ((seq * num_splits + split) * Hkv + kv_head) * num_q_tiles + q_tile: the query tiles (and
    # then the kv heads) of one key range are neighbours, so they read the same K/V blocks together.
    pid = tl.program_id(0)
    q_tile = pid % num_q_tiles
    rest = pid // num_q_tiles
    kv_head = rest % num_kv_heads
    rest = rest // num_kv_heads
    split = rest % num_splits
    seq = rest // num_splits

    q_start = tl.load(cu_seqlens_q_ptr + seq)
    q_len = tl.load(cu_seqlens_q_ptr + seq + 1) - q_start
    tok_start = q_tile * BLOCK_Q
    if tok_start >= q_len:  # the grid is sized for max_q_len; this sequence has fewer tokens
        return
    seq_len = tl.load(seq_lens_ptr + seq)
    ctx_len = seq_len - q_len  # keys already cached before this step's first query

    # The sequence's keys are cut into num_splits ranges of whole tiles from its actual length
    # (num_splits is fixed on the host, e.g. at graph capture; the ranges follow seq_len at replay).
    # Causal: no row of this tile sees a key past ctx_len + tok_start + BLOCK_Q - 1.
    if SLIDING:
        # Only keys from the first query's window on are split (the same ranges for every tile of the
        # sequence), then cut to this tile's: its first row sees none before first_pos - window + 1.
        win_lo = tl.maximum(ctx_len - window + 1, 0)
        lo, hi = split_key_range(seq_len - win_lo, split, num_splits, BLOCK_N)
        lo = tl.maximum(lo + win_lo, ctx_len + tok_start - window + 1)
        hi = hi + win_lo
    else:
        lo, hi = split_key_range(seq_len, split, num_splits, BLOCK_N)
    kv_end = tl.minimum(seq_len, ctx_len + tok_start + BLOCK_Q)
    hi = tl.minimum(hi, kv_end)  # lo >= hi: empty range, only -inf maxima are written

    offs_d = tl.arange(0, HEAD_DIM)
    q, q_rows, heads, mask_m, query_pos = _load_query_tile(
        q_ptr, q_start, q_len, ctx_len, tok_start, kv_head, stride_q_tok, stride_q_head, GQA, GQA_PAD, HEAD_DIM, BLOCK_M
    )

    if FP8_KV:
        qk_scale = qk_scale * tl.load(k_scale_ptr)  # q . (k * k_scale) == (q . k) * k_scale
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    bt_row_ptr = block_tables_ptr + seq.to(tl.int64) * stride_bt_seq
    kv_head_off = kv_head.to(tl.int64) * stride_cache_head
    # Keys below ctx_len + tok_start + 1 are visible to every row of the tile: whole BLOCK_N tiles of
    # them (the cached prefix, i.e. nearly all of a chat turn's keys) need no mask at all; the tiles
    # from `mid` on (the causal diagonal, the range's ragged end) are masked. In a sliding layer so
    # are the tiles before `full_lo`, whose keys have left the window of the tile's last real row.
    if SLIDING:
        last_pos = ctx_len + tl.minimum(tok_start + BLOCK_Q, q_len) - 1
        full_lo = tl.minimum(lo + tl.cdiv(tl.maximum(last_pos - window + 1 - lo, 0), BLOCK_N) * BLOCK_N, hi)
        full_lo = tl.maximum(full_lo, lo)  # an empty range (hi < lo) stays empty
        for start in range(lo, full_lo, BLOCK_N):
            acc, m_i, l_i = _masked_tile_step(
                q, acc, m_i, l_i, start, hi, query_pos, window, k_cache_ptr, v_cache_ptr, bt_row_ptr,
                kv_head_off, stride_cache_block, stride_cache_slot, qk_scale, BLOCK_SIZE, HEAD_DIM, BLOCK_N,
                SLIDING, DOT_PRECISION,
            )
    else:
        full_lo = lo
    mid = full_lo + tl.maximum(tl.minimum(hi, ctx_len + tok_start + 1) - full_lo, 0) // BLOCK_N * BLOCK_N
    if mid > full_lo:
        # Software-pipelined by hand: the next tile's K/V loads are issued before this tile's dots,
        # so their latency hides behind the compute (faster on an H200 than Triton's pipeliner; see
        # prefill_split_config). The last iteration reloads its own tile, an L2 hit, instead of
        # branching.
        kv_offs = _full_tile_offsets(bt_row_ptr, full_lo, kv_head_off, stride_cache_block, stride_cache_slot,
                                     BLOCK_SIZE, HEAD_DIM, BLOCK_N)
        k = tl.load(k_cache_ptr + kv_offs)
        v = tl.load(v_cache_ptr + kv_offs)
        for start in range(full_lo, mid, BLOCK_N):
            kv_offs = _full_tile_offsets(bt_row_ptr, tl.minimum(start + BLOCK_N, mid - BLOCK_N), kv_head_off,
                                         stride_cache_block, stride_cache_slot, BLOCK_SIZE, HEAD_DIM, BLOCK_N)
            k_next = tl.load(k_cache_ptr + kv_offs)
            v_next = tl.load(v_cache_ptr + kv_offs)
            acc, m_i, l_i = _full_tile_step(q, k, v, acc, m_i, l_i, qk_scale, DOT_PRECISION)
            k = k_next
            v = v_next
    for start in range(mid, hi, BLOCK_N):
        acc, m_i, l_i = _masked_tile_step(
            q, acc, m_i, l_i, start, hi, query_pos, window, k_cache_ptr, v_cache_ptr, bt_row_ptr, kv_head_off,
            stride_cache_block, stride_cache_slot, qk_scale, BLOCK_SIZE, HEAD_DIM, BLOCK_N, SLIDING, DOT_PRECISION,
        )

    if FP8_KV:
        acc = acc * tl.load(v_scale_ptr)  # sum p * (v * v_scale), once (the merge is linear in acc)
    if SPLIT_K:
        rows = (q_rows * num_q_heads + heads) * num_splits + split  # [BLOCK_M] int64
        tl.store(part_max_ptr + rows, m_i, mask=mask_m)
        # Rows that saw no key (empty range) write only their -inf max: the merge skips the rest.
        live = mask_m & (m_i > float("-inf"))
        tl.store(part_sum_ptr + rows, l_i, mask=live)
        tl.store(part_acc_ptr + rows[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=live[:, None])
    else:
        # One split: key 0 is visible to every row, so l_i > 0 for every real row.
        _store_out_tile(out_ptr, acc, l_i, q_rows, heads, mask_m, stride_out_tok, stride_out_head, HEAD_DIM)


@triton.jit
def _prefill_merge_kernel(
    part_acc_ptr,  # [N, Hq, num_splits, D] fp32
    part_max_ptr,  # [N, Hq, num_splits] fp32
    part_sum_ptr,  # [N, Hq, num_splits] fp32
    cu_seqlens_q_ptr,  # [B + 1] int32
    out_ptr,  # [N, Hq, D]
    num_seqs,
    num_q_heads,
    num_splits,
    stride_out_tok,
    stride_out_head,
    HEAD_DIM: tl.constexpr,
    BLOCK_S: tl.constexpr,  # num_splits padded to a power of two
    HEADS: tl.constexpr,  # query heads per program
):
    """One program per (token, HEADS query heads): out = sum_s w_s acc_s / sum_s w_s l_s with
    w_s = 2^(m_s - max). The max, sum and acc loads are issued together; a split that saw no key
    (max -inf, its sum and acc never written, so possibly NaN) is selected away after loading, as a
    load masked on the max would wait for it (latency-bound: 8.0 -> 5.0 us on an H200, 8 splits)."""
    tok = tl.program_id(0)
    head0 = tl.program_id(1) * HEADS
    if tok >= tl.load(cu_seqlens_q_ptr + num_seqs):  # padding rows past cu_seqlens_q[B]: not written
        return
    offs_h = tl.arange(0, HEADS)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, HEAD_DIM)
    heads = head0 + offs_h
    rows = (tok.to(tl.int64) * num_q_heads + heads)[:, None] * num_splits + offs_s[None, :]  # [HEADS, S]
    exists = (heads < num_q_heads)[:, None] & (offs_s < num_splits)[None, :]
    m = tl.load(part_max_ptr + rows, mask=exists, other=float("-inf"))
    l = tl.load(part_sum_ptr + rows, mask=exists, other=0.0)
    acc = tl.load(
        part_acc_ptr + rows[:, :, None] * HEAD_DIM + offs_d[None, None, :], mask=exists[:, :, None], other=0.0
    )  # [HEADS, S, D]
    out = combine_splits(m, l, acc, 1)  # [HEADS, D]
    tl.store(
        out_ptr + tok.to(tl.int64) * stride_out_tok + heads[:, None] * stride_out_head + offs_d[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=(heads < num_q_heads)[:, None],
    )


def paged_attention_prefill_split(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    max_q_len: int,
    num_splits: int | None = None,
    *,
    max_seq_len: int | None = None,
    window: int | None = None,
    out: torch.Tensor | None = None,
    config: PrefillConfig | None = None,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """paged_attention_prefill with the key range split across programs (same inputs and result).

    For chunks of few queries (<= SPLIT_MAX_Q_LEN) over long contexts. Unlike paged_attention_prefill,
    max_q_len must bound every q_len_b (the grid holds cdiv(max_q_len, tokens per tile) tiles per
    sequence). num_splits: None picks `choose_prefill_splits` from max_seq_len (a host int bound,
    default block_tables.shape[1] * block_size); the ranges follow each sequence's actual seq_len, so a
    CUDA graph captured for an upper bound is valid for every replay. No host syncs; the fp32 partials
    [N, Hq, num_splits, D] come from the caching allocator (inside a capture: the graph's pool).
    window, k_scale, v_scale: as paged_attention_prefill's (None: global; an e4m3 cache's scales).
    """
    check_prefill_inputs(q, k_cache, v_cache, block_tables, cu_seqlens_q, seq_lens, out, window, k_scale, v_scale)
    fp8_kv = k_scale is not None
    num_tokens, num_q_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    batch = seq_lens.shape[0]
    gqa = num_q_heads // num_kv_heads
    gqa_pad = triton.next_power_of_2(gqa)
    if out is None:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
    if batch == 0 or num_tokens == 0:
        return out
    if max_q_len < 1:
        raise ValueError(f"max_q_len must be >= 1 (a bound on every sequence's new tokens), got {max_q_len}")
    if max_seq_len is None:
        max_seq_len = block_tables.shape[1] * block_size
    cfg = config or prefill_split_config(head_dim, q.dtype, gqa_pad, max_q_len)
    if cfg.block_m < gqa_pad:
        raise ValueError(f"block_m ({cfg.block_m}) must hold a whole GQA group ({gqa_pad})")
    if num_splits is None:
        num_splits = choose_prefill_splits(
            batch, num_q_heads, num_kv_heads, head_dim, q.dtype, max_q_len, max_seq_len, q.device, cfg, window
        )
    if not 1 <= num_splits <= SPLIT_MAX_SPLITS:
        raise ValueError(f"num_splits must be in [1, {SPLIT_MAX_SPLITS}], got {num_splits}")
    num_q_tiles = triton.cdiv(max_q_len, cfg.block_m // gqa_pad)
    num_programs = batch * num_splits * num_kv_heads * num_q_tiles
    if num_programs >= 2**31:
        raise ValueError(f"{num_programs} programs exceed the grid limit: lower max_q_len, batch or num_splits")

    part_acc, part_max, part_sum = split_partials(num_tokens, num_q_heads, num_splits, head_dim, out)
    _prefill_split_kernel[(num_programs,)](
        q,
        k_cache,
        v_cache,
        block_tables,
        cu_seqlens_q,
        seq_lens,
        out,
        part_acc,
        part_max,
        part_sum,
        k_scale if fp8_kv else seq_lens,
        v_scale if fp8_kv else seq_lens,
        scale * LOG2E,
        window or 0,
        num_q_heads,
        num_kv_heads,
        num_splits,
        num_q_tiles,
        *paged_strides(q, out, block_tables, k_cache),
        GQA=gqa,
        GQA_PAD=gqa_pad,
        HEAD_DIM=head_dim,
        BLOCK_SIZE=block_size,
        BLOCK_M=cfg.block_m,
        BLOCK_N=cfg.block_n,
        SPLIT_K=num_splits > 1,
        SLIDING=window is not None,
        FP8_KV=fp8_kv,
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )
    if num_splits > 1:
        heads = min(MERGE_HEADS, triton.next_power_of_2(num_q_heads))
        block_s = triton.next_power_of_2(num_splits)
        _prefill_merge_kernel[(num_tokens, triton.cdiv(num_q_heads, heads))](
            part_acc,
            part_max,
            part_sum,
            cu_seqlens_q,
            out,
            batch,
            num_q_heads,
            num_splits,
            out.stride(0),
            out.stride(1),
            HEAD_DIM=head_dim,
            BLOCK_S=block_s,
            HEADS=heads,
            num_warps=8 if heads * block_s * head_dim > 4096 else 4,
        )
    return out


