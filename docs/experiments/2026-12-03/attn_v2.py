"""The measured candidate (2026-12-03; since moved into kernels/paged_attention_prefill.py, kept here as the
version the logs timed). Candidate split-KV prefill attention for the pinned chat turn: loads issued a tile ahead by hand,
and a merge whose three loads do not wait on each other."""
import torch
import triton
import triton.language as tl

from kernels._paged import LOG2E
from kernels.paged_attention_prefill import _load_query_tile, prefill_split_config


@triton.jit
def _tile_offsets(bt_row_ptr, start, kv_head_off, stride_cache_block, stride_cache_slot,
                  BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    pos = start + tl.arange(0, BLOCK_N)
    block_ids = tl.load(bt_row_ptr + pos // BLOCK_SIZE).to(tl.int64)
    row = block_ids * stride_cache_block + (pos % BLOCK_SIZE).to(tl.int64) * stride_cache_slot + kv_head_off
    return row[:, None] + tl.arange(0, HEAD_DIM)[None, :]


@triton.jit
def _split_v2_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, block_tables_ptr, cu_seqlens_q_ptr, seq_lens_ptr,
    part_acc_ptr, part_max_ptr, part_sum_ptr, qk_scale, num_q_heads, num_kv_heads, num_splits, num_q_tiles,
    stride_q_tok, stride_q_head, stride_bt_seq, stride_cache_block, stride_cache_slot, stride_cache_head,
    GQA: tl.constexpr, GQA_PAD: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PREFETCH: tl.constexpr,
):
    BLOCK_Q: tl.constexpr = BLOCK_M // GQA_PAD
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
    if tok_start >= q_len:
        return
    seq_len = tl.load(seq_lens_ptr + seq)
    ctx_len = seq_len - q_len
    keys_per_split = tl.cdiv(tl.cdiv(seq_len, num_splits), BLOCK_N) * BLOCK_N
    lo = split * keys_per_split
    kv_end = tl.minimum(seq_len, ctx_len + tok_start + BLOCK_Q)
    hi = tl.minimum(lo + keys_per_split, kv_end)
    offs_d = tl.arange(0, HEAD_DIM)
    q, q_rows, heads, mask_m, query_pos = _load_query_tile(
        q_ptr, q_start, q_len, ctx_len, tok_start, kv_head, stride_q_tok, stride_q_head, GQA, GQA_PAD, HEAD_DIM, BLOCK_M
    )
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    bt_row_ptr = block_tables_ptr + seq.to(tl.int64) * stride_bt_seq
    kv_head_off = kv_head.to(tl.int64) * stride_cache_head
    mid = lo + tl.maximum(tl.minimum(hi, ctx_len + tok_start + 1) - lo, 0) // BLOCK_N * BLOCK_N
    if PREFETCH:
        if mid > lo:
            offs = _tile_offsets(bt_row_ptr, lo, kv_head_off, stride_cache_block, stride_cache_slot,
                                 BLOCK_SIZE, HEAD_DIM, BLOCK_N)
            k = tl.load(k_cache_ptr + offs)
            v = tl.load(v_cache_ptr + offs)
            for start in range(lo, mid, BLOCK_N):
                # Next tile's K/V in flight while this one is computed (the last iteration reloads its own).
                nxt = tl.minimum(start + BLOCK_N, mid - BLOCK_N)
                offs_n = _tile_offsets(bt_row_ptr, nxt, kv_head_off, stride_cache_block, stride_cache_slot,
                                       BLOCK_SIZE, HEAD_DIM, BLOCK_N)
                k_next = tl.load(k_cache_ptr + offs_n)
                v_next = tl.load(v_cache_ptr + offs_n)
                s = tl.dot(q, tl.trans(k)) * qk_scale
                m_new = tl.maximum(m_i, tl.max(s, axis=1))
                alpha = tl.exp2(m_i - m_new)
                p = tl.exp2(s - m_new[:, None])
                l_i = l_i * alpha + tl.sum(p, axis=1)
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
                m_i = m_new
                k = k_next
                v = v_next
    else:
        for start in range(lo, mid, BLOCK_N):
            offs = _tile_offsets(bt_row_ptr, start, kv_head_off, stride_cache_block, stride_cache_slot,
                                 BLOCK_SIZE, HEAD_DIM, BLOCK_N)
            k = tl.load(k_cache_ptr + offs)
            v = tl.load(v_cache_ptr + offs)
            s = tl.dot(q, tl.trans(k)) * qk_scale
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
    for start in range(mid, hi, BLOCK_N):
        pos = start + tl.arange(0, BLOCK_N)
        mask_n = pos < hi
        block_ids = tl.load(bt_row_ptr + pos // BLOCK_SIZE, mask=mask_n, other=0).to(tl.int64)
        row = block_ids * stride_cache_block + (pos % BLOCK_SIZE).to(tl.int64) * stride_cache_slot + kv_head_off
        offs = row[:, None] + offs_d[None, :]
        k = tl.load(k_cache_ptr + offs, mask=mask_n[:, None], other=0.0)
        v = tl.load(v_cache_ptr + offs, mask=mask_n[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        s = tl.where((pos[None, :] <= query_pos[:, None]) & mask_n[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_sub = tl.where(m_new > float("-inf"), m_new, 0.0)
        alpha = tl.exp2(m_i - m_sub)
        p = tl.exp2(s - m_sub[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    rows = (q_rows * num_q_heads + heads) * num_splits + split
    tl.store(part_max_ptr + rows, m_i, mask=mask_m)
    live = mask_m & (m_i > float("-inf"))
    tl.store(part_sum_ptr + rows, l_i, mask=live)
    tl.store(part_acc_ptr + rows[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=live[:, None])


@triton.jit
def _merge_v2_kernel(
    part_acc_ptr, part_max_ptr, part_sum_ptr, cu_seqlens_q_ptr, out_ptr, num_seqs, num_q_heads, num_splits,
    stride_out_tok, stride_out_head,
    HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr, HEADS: tl.constexpr,
):
    """HEADS query heads of one token per program; the max, sum and acc loads are issued together
    (dead splits are selected away after loading, not masked on a load that waits for the max)."""
    tok = tl.program_id(0)
    head0 = tl.program_id(1) * HEADS
    if tok >= tl.load(cu_seqlens_q_ptr + num_seqs):
        return
    offs_h = tl.arange(0, HEADS)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = (tok.to(tl.int64) * num_q_heads + head0 + offs_h)[:, None] * num_splits + offs_s[None, :]  # [H, S]
    in_range = (offs_s < num_splits)[None, :] & ((head0 + offs_h) < num_q_heads)[:, None]
    m = tl.load(part_max_ptr + rows, mask=in_range, other=float("-inf"))
    l = tl.load(part_sum_ptr + rows, mask=in_range, other=0.0)
    acc = tl.load(part_acc_ptr + rows[:, :, None] * HEAD_DIM + offs_d[None, None, :], mask=in_range[:, :, None],
                  other=0.0)  # [H, S, D]
    live = m > float("-inf")
    m_max = tl.max(m, axis=1)
    m_max = tl.where(m_max > float("-inf"), m_max, 0.0)
    w = tl.where(live, tl.exp2(m - m_max[:, None]), 0.0)  # [H, S]
    denom = tl.sum(tl.where(live, w * l, 0.0), axis=1)  # [H]
    acc = tl.where(live[:, :, None], acc, 0.0)
    out = tl.sum(acc * w[:, :, None], axis=1) / tl.where(denom > 0.0, denom, 1.0)[:, None]  # [H, D]
    heads = head0 + offs_h
    tl.store(out_ptr + tok.to(tl.int64) * stride_out_tok + heads[:, None] * stride_out_head + offs_d[None, :],
             out.to(out_ptr.dtype.element_ty), mask=(heads < num_q_heads)[:, None])


def split_v2(q, k_cache, v_cache, block_tables, cu_seqlens_q, seq_lens, scale, max_q_len, num_splits,
             out=None, block_m=None, block_n=None, num_warps=4, num_stages=1, prefetch=True, heads=4,
             merge_warps=4):
    num_tokens, num_q_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    batch = seq_lens.shape[0]
    gqa = num_q_heads // num_kv_heads
    gqa_pad = triton.next_power_of_2(gqa)
    cfg = prefill_split_config(head_dim, q.dtype, gqa_pad, max_q_len)
    block_m = block_m or cfg.block_m
    block_n = block_n or cfg.block_n
    if out is None:
        out = torch.empty_like(q)
    num_q_tiles = triton.cdiv(max_q_len, block_m // gqa_pad)
    part_acc = torch.empty(num_tokens, num_q_heads, num_splits, head_dim, dtype=torch.float32, device=q.device)
    part_max = torch.empty(num_tokens, num_q_heads, num_splits, dtype=torch.float32, device=q.device)
    part_sum = torch.empty(num_tokens, num_q_heads, num_splits, dtype=torch.float32, device=q.device)
    _split_v2_kernel[(batch * num_splits * num_kv_heads * num_q_tiles,)](
        q, k_cache, v_cache, block_tables, cu_seqlens_q, seq_lens, part_acc, part_max, part_sum,
        scale * LOG2E, num_q_heads, num_kv_heads, num_splits, num_q_tiles,
        q.stride(0), q.stride(1), block_tables.stride(0), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        GQA=gqa, GQA_PAD=gqa_pad, HEAD_DIM=head_dim, BLOCK_SIZE=block_size, BLOCK_M=block_m, BLOCK_N=block_n,
        PREFETCH=prefetch, num_warps=num_warps, num_stages=num_stages,
    )
    merge(part_acc, part_max, part_sum, cu_seqlens_q, out, batch, num_splits, heads, merge_warps)
    return out


def merge(part_acc, part_max, part_sum, cu_seqlens_q, out, batch, num_splits, heads=4, num_warps=4):
    num_tokens, num_q_heads, head_dim = out.shape
    _merge_v2_kernel[(num_tokens, triton.cdiv(num_q_heads, heads))](
        part_acc, part_max, part_sum, cu_seqlens_q, out, batch, num_q_heads, num_splits,
        out.stride(0), out.stride(1), HEAD_DIM=head_dim, BLOCK_S=triton.next_power_of_2(num_splits),
        HEADS=heads, num_warps=num_warps,
    )
