"""Paged attention for prefill and mixed batches: packed new tokens, causal, keys from the paged cache.

Sequence b contributes q[cu_seqlens_q[b]:cu_seqlens_q[b+1]] (q_len_b tokens, 1 for a decode row);
query j sits at absolute position seq_lens[b] - q_len_b + j and attends to keys 0..that position, all
read from the cache (their K/V were written before attention), which covers prefix-cache hits and
chunked prefill alike. In a sliding-window layer query j sees only the keys (position - window,
position]; a tile walks only the keys some row of it sees, so a long context costs the window.

Grid: (query tile, kv_head). A tile holds BLOCK_M rows = BLOCK_M // GQA_PAD tokens x GQA_PAD query
heads of one kv head, so every K/V tile is loaded once for the whole GQA group. Tiles are numbered
over the packed batch (sequence b's tiles start at cu_seqlens_q[b] // BLOCK_Q + b) so that a batch of
one long prompt and many decode rows launches few idle programs; each program finds its sequence by
binary search over cu_seqlens_q.

The split-KV variant for few queries over long contexts is paged_attention_prefill_split.py.
"""

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels._checks import check_paged_attention_inputs, check_window
from kernels._paged import LOG2E, online_softmax_weights, paged_kv_tile_offsets, paged_strides, visible_keys


@dataclass(frozen=True)
class PrefillConfig:
    """Launch parameters (heuristic by default)."""

    block_m: int  # query rows per program (tokens x padded GQA group)
    block_n: int  # keys per inner-loop iteration
    num_warps: int
    num_stages: int


def prefill_config(head_dim: int, dtype: torch.dtype, gqa_pad: int, max_q_len: int) -> PrefillConfig:
    """Query tiles sized to the batch's longest chunk: 16 rows for decode-only batches, up to 128."""
    element_size = torch.finfo(dtype).bits // 8
    rows = max(16, gqa_pad * max(1, max_q_len))
    largest = 64 if element_size == 4 else 128  # fp32 (tests, CPU) spills registers at 128
    block_m = max(gqa_pad, 16 if rows <= 16 else 64 if rows <= 64 else largest)
    block_n = 32 if element_size * head_dim > 256 else 64  # fp32 D=128 or D=256: smaller K/V tiles
    num_warps = 8 if block_m >= 128 else 4
    # 3 stages: K/V double-buffered and the block-id gather prefetched (Triton 3.6 pipeliner).
    return PrefillConfig(block_m=block_m, block_n=block_n, num_warps=num_warps, num_stages=3)


def check_prefill_inputs(q, k_cache, v_cache, block_tables, cu_seqlens_q, seq_lens, out, window,
                         k_scale=None, v_scale=None) -> None:
    """The checks of both prefill launchers (this one and the split one)."""
    check_paged_attention_inputs(q, k_cache, v_cache, block_tables, seq_lens, out, k_scale, v_scale,
                                 cu_seqlens_q=cu_seqlens_q)
    check_window(window)
    if cu_seqlens_q.shape != (seq_lens.shape[0] + 1,):
        raise ValueError(f"cu_seqlens_q has shape {tuple(cu_seqlens_q.shape)}, expected ({seq_lens.shape[0] + 1},)")


@triton.jit
def _load_query_tile(
    q_ptr, q_start, q_len, ctx_len, tok_start, kv_head, stride_q_tok, stride_q_head,
    GQA: tl.constexpr, GQA_PAD: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
):
    """The tile's query rows: BLOCK_M // GQA_PAD tokens from tok_start, times the GQA query heads of
    kv_head (padded to GQA_PAD), so one K/V tile serves every head that shares it.
    Returns q [BLOCK_M, D], each row's token row and head, the mask of real rows, and their positions."""
    offs_m = tl.arange(0, BLOCK_M)
    tok = tok_start + offs_m // GQA_PAD  # [BLOCK_M] token within the sequence's new tokens
    g = offs_m % GQA_PAD
    mask_m = (tok < q_len) & (g < GQA)
    heads = kv_head * GQA + g
    q_rows = (q_start + tok).to(tl.int64)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(
        q_ptr + q_rows[:, None] * stride_q_tok + heads[:, None] * stride_q_head + offs_d[None, :],
        mask=mask_m[:, None],
        other=0.0,
    )
    return q, q_rows, heads, mask_m, ctx_len + tok


@triton.jit
def _store_out_tile(out_ptr, acc, l_i, q_rows, heads, mask_m, stride_out_tok, stride_out_head, HEAD_DIM: tl.constexpr):
    """Normalise the tile's accumulator and store its real rows (l_i > 0 for each: key 0 is visible)."""
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    offs_d = tl.arange(0, HEAD_DIM)
    tl.store(
        out_ptr + q_rows[:, None] * stride_out_tok + heads[:, None] * stride_out_head + offs_d[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=mask_m[:, None],
    )


@triton.jit
def _prefill_kernel(
    q_ptr,  # [N, Hq, D]
    k_cache_ptr,  # [num_blocks, block_size, Hkv, D], contiguous
    v_cache_ptr,  # [num_blocks, block_size, Hkv, D], contiguous
    block_tables_ptr,  # [B, max_blocks_per_seq] int32
    cu_seqlens_q_ptr,  # [B + 1] int32
    seq_lens_ptr,  # [B] int32
    out_ptr,  # [N, Hq, D]
    k_scale_ptr,  # [1] fp32, FP8_KV only: cached K = e4m3(K / k_scale)
    v_scale_ptr,  # [1] fp32, FP8_KV only
    qk_scale,  # softmax scale * log2(e)
    window,  # SLIDING: the query at p sees keys (p - window, p]
    num_seqs,
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
    SLIDING: tl.constexpr,  # a sliding-window layer (else every earlier key is seen)
    FP8_KV: tl.constexpr,  # e4m3 cache: tiles are converted to q's dtype, the scales applied outside the loop
    DOT_PRECISION: tl.constexpr,
):
    BLOCK_Q: tl.constexpr = BLOCK_M // GQA_PAD  # tokens per tile
    tile = tl.program_id(0)
    kv_head = tl.program_id(1)

    # Largest seq with first_tile(seq) = cu[seq] // BLOCK_Q + seq <= tile (first_tile is increasing).
    lo = tile * 0  # int32 tensors from the start: loop-carried values must keep one type
    hi = lo + num_seqs
    while hi - lo > 1:
        mid = (lo + hi) // 2
        ok = tl.load(cu_seqlens_q_ptr + mid) // BLOCK_Q + mid <= tile
        lo = tl.where(ok, mid, lo)
        hi = tl.where(ok, hi, mid)
    seq = lo
    q_start = tl.load(cu_seqlens_q_ptr + seq)
    q_len = tl.load(cu_seqlens_q_ptr + seq + 1) - q_start
    tok_start = (tile - (q_start // BLOCK_Q + seq)) * BLOCK_Q
    if tok_start >= q_len:
        return
    seq_len = tl.load(seq_lens_ptr + seq)
    ctx_len = seq_len - q_len  # keys already cached before this step's first query

    offs_n = tl.arange(0, BLOCK_N)
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
    kv_end = tl.minimum(seq_len, ctx_len + tok_start + BLOCK_Q)  # one past the tile's last position
    if SLIDING:  # the first key of the tile's first row's window: no row sees an earlier one
        kv_start = tl.maximum(ctx_len + tok_start - window + 1, 0)
    else:
        kv_start = 0
    for start in range(kv_start, kv_end, BLOCK_N):
        pos = start + offs_n
        mask_n = pos < kv_end
        kv_offs = paged_kv_tile_offsets(
            bt_row_ptr, pos, mask_n, kv_head_off, stride_cache_block, stride_cache_slot, BLOCK_SIZE, HEAD_DIM
        )
        k = tl.load(k_cache_ptr + kv_offs, mask=mask_n[:, None], other=0.0)  # [BLOCK_N, D]
        if FP8_KV:
            k = k.to(q.dtype)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale  # [BLOCK_M, BLOCK_N]
        s = tl.where(visible_keys(pos, mask_n, query_pos, window, SLIDING), s, float("-inf"))
        # Without a window key 0 is visible to every row, so after the first tile every max is finite;
        # with one, a row whose window starts past this tile has seen no key yet.
        p, alpha, m_new, l_i = online_softmax_weights(s, m_i, l_i, SLIDING)
        v = tl.load(v_cache_ptr + kv_offs, mask=mask_n[:, None], other=0.0)  # [BLOCK_N, D]
        if FP8_KV:
            v = v.to(q.dtype)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new

    if FP8_KV:
        acc = acc * tl.load(v_scale_ptr)  # sum p * (v * v_scale), once
    _store_out_tile(out_ptr, acc, l_i, q_rows, heads, mask_m, stride_out_tok, stride_out_head, HEAD_DIM)


def paged_attention_prefill(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    max_q_len: int,
    *,
    window: int | None = None,
    out: torch.Tensor | None = None,
    config: PrefillConfig | None = None,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal attention of packed new tokens over a paged KV cache; returns out [N, Hq, D] (q's dtype).

    q: [N, Hq, D] (last dim contiguous); cu_seqlens_q: int32 [B + 1], cu[0] = 0, non-decreasing;
    seq_lens: int32 [B], keys per sequence including its new tokens (>= q_len_b); block_tables: int32
    [B, max_blocks_per_seq]; k_cache, v_cache: [num_blocks, block_size, Hkv, D], contiguous, q's dtype
    or e4m3 holding K / k_scale and V / v_scale (k_scale, v_scale: fp32, one element, read on the device).
    max_q_len: host int >= every q_len_b (only picks the tile size; no host sync). Rows of q past
    cu_seqlens_q[B] are not written. window: a sliding-window layer's window (query at p sees keys
    p - window + 1 .. p); None: every key up to p. out: optional preallocated output.
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
    cfg = config or prefill_config(head_dim, q.dtype, gqa_pad, max_q_len)
    if cfg.block_m < gqa_pad:
        raise ValueError(f"block_m ({cfg.block_m}) must hold a whole GQA group ({gqa_pad})")
    block_q = cfg.block_m // gqa_pad
    num_tiles = triton.cdiv(num_tokens, block_q) + batch  # upper bound on the packed tile count
    _prefill_kernel[(num_tiles, num_kv_heads)](
        q,
        k_cache,
        v_cache,
        block_tables,
        cu_seqlens_q,
        seq_lens,
        out,
        k_scale if fp8_kv else seq_lens,
        v_scale if fp8_kv else seq_lens,
        scale * LOG2E,
        window or 0,
        batch,
        *paged_strides(q, out, block_tables, k_cache),
        GQA=gqa,
        GQA_PAD=gqa_pad,
        HEAD_DIM=head_dim,
        BLOCK_SIZE=block_size,
        BLOCK_M=cfg.block_m,
        BLOCK_N=cfg.block_n,
        SLIDING=window is not None,
        FP8_KV=fp8_kv,
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )
    return out


def paged_attention_prefill_ref(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    max_q_len: int | None = None,
    *,
    window: int | None = None,
    out: torch.Tensor | None = None,
    config: PrefillConfig | None = None,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """Pure-torch paged_attention_prefill (same arguments; max_q_len and config ignored).

    fp32 scaled_dot_product_attention per sequence; reads cu_seqlens_q / seq_lens on the host.
    Rows of q past cu_seqlens_q[B] are zero when `out` is not given.
    """
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    gqa = q.shape[1] // num_kv_heads
    if out is None:
        out = torch.zeros_like(q, memory_format=torch.contiguous_format)
    cu = cu_seqlens_q.tolist()
    for seq, seq_len in enumerate(seq_lens.tolist()):
        q_start, q_end = cu[seq], cu[seq + 1]
        q_len = q_end - q_start
        if q_len == 0:
            continue
        if seq_len < q_len:
            raise ValueError(f"sequence {seq}: seq_len {seq_len} < q_len {q_len}")
        blocks = block_tables[seq, : triton.cdiv(seq_len, block_size)].long()
        # [L, Hkv, D] -> [Hq, L, D]: repeat each kv head for its G query heads.
        k = k_cache[blocks].flatten(0, 1)[:seq_len].float().transpose(0, 1).repeat_interleave(gqa, dim=0)
        v = v_cache[blocks].flatten(0, 1)[:seq_len].float().transpose(0, 1).repeat_interleave(gqa, dim=0)
        if k_scale is not None:  # an e4m3 cache holds K / k_scale and V / v_scale
            k, v = k * k_scale.float(), v * v_scale.float()
        qs = q[q_start:q_end].float().transpose(0, 1)  # [Hq, q_len, D]
        if q_len == seq_len and window is None:  # no cached prefix: plain causal
            o = torch.nn.functional.scaled_dot_product_attention(qs, k, v, is_causal=True, scale=scale)
        else:  # query j sits at position seq_len - q_len + j
            query_pos = torch.arange(seq_len - q_len, seq_len, device=q.device)[:, None]
            key_pos = torch.arange(seq_len, device=q.device)[None, :]
            visible = key_pos <= query_pos
            if window is not None:
                visible &= key_pos > query_pos - window
            o = torch.nn.functional.scaled_dot_product_attention(qs, k, v, attn_mask=visible, scale=scale)
        out[q_start:q_end] = o.transpose(0, 1).to(out.dtype)
    return out
