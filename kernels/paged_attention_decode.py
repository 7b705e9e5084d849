"""Paged attention for decode: one query token per sequence against its whole paged KV history.

Flash-decoding: the grid is (kv_head, sequence, split). Each program loads every K/V tile of its key
range once and applies it to all G = Hq / Hkv query heads of its KV head (GQA), keeping an online
softmax in fp32. With a sliding window only the last `window` keys are split and walked, so a
long context costs the window. With more than one split, each program writes an unnormalised partial result
(acc, running max, running sum) and a second kernel merges the splits; with one split the first
kernel writes the output directly. Splitting lets batch 1 with a long context still fill the GPU.
"""

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels._checks import check_paged_attention_inputs, check_window, num_sms
from kernels._paged import (
    LOG2E,
    merge_split_partials,
    online_softmax_weights,
    paged_kv_tile_offsets,
    paged_strides,
    split_partials,
)

MAX_SPLITS = 64
MIN_KEYS_PER_SPLIT = 128  # below this the merge costs more than the extra parallelism gains
PROGRAMS_PER_SM = 8  # enough programs that the last wave is short


@dataclass(frozen=True)
class DecodeConfig:
    """Launch parameters of the split kernel (heuristic by default; benchmarks.kernels sweeps them)."""

    block_n: int  # keys per inner-loop iteration; spans several cache blocks
    num_warps: int
    num_stages: int


def decode_config(head_dim: int, dtype: torch.dtype) -> DecodeConfig:
    """About 16 KB per K (and per V) tile: 64 keys for bf16 D=128, 128 keys for D=64.

    num_stages=5 is what makes Triton 3.6's pipeliner double-buffer K/V here: the block-id gather
    feeding the K/V addresses takes a stage of its own (with 3-4 stages K/V get a single buffer).
    That is ~72 KB of shared memory per program, 3 programs per H100/H200 SM.
    """
    element_size = torch.finfo(dtype).bits // 8
    block_n = max(16, min(128, 16384 // (head_dim * element_size)))
    return DecodeConfig(block_n=block_n, num_warps=4, num_stages=5)


def choose_num_splits(batch: int, num_kv_heads: int, max_seq_len: int, device: torch.device) -> int:
    """Split the key range until there are ~PROGRAMS_PER_SM programs per SM, keeping splits long."""
    programs = max(1, batch * num_kv_heads)
    wanted = triton.cdiv(PROGRAMS_PER_SM * num_sms(device), programs)
    by_length = max(1, triton.cdiv(max_seq_len, MIN_KEYS_PER_SPLIT))
    return max(1, min(wanted, by_length, MAX_SPLITS))


@triton.jit
def _decode_split_kernel(
    q_ptr,  # [B, Hq, D]
    k_cache_ptr,  # [num_blocks, block_size, Hkv, D], contiguous
    v_cache_ptr,  # [num_blocks, block_size, Hkv, D], contiguous
    block_tables_ptr,  # [B, max_blocks_per_seq] int32
    seq_lens_ptr,  # [B] int32
    out_ptr,  # [B, Hq, D], written only without SPLIT_K
    part_acc_ptr,  # [B, Hq, num_splits, D] fp32, unnormalised sum of p * v
    part_max_ptr,  # [B, Hq, num_splits] fp32, running max of the log2-domain scores
    part_sum_ptr,  # [B, Hq, num_splits] fp32, running sum of exp2(score - max)
    k_scale_ptr,  # [1] fp32, FP8_KV only: cached K = e4m3(K / k_scale)
    v_scale_ptr,  # [1] fp32, FP8_KV only
    qk_scale,  # softmax scale * log2(e)
    window,  # SLIDING: the query at p sees keys (p - window, p]
    num_q_heads,
    num_splits,
    stride_q_seq,
    stride_q_head,
    stride_out_seq,
    stride_out_head,
    stride_bt_seq,
    stride_cache_block,
    stride_cache_slot,
    stride_cache_head,
    GQA: tl.constexpr,  # query heads per kv head
    BLOCK_G: tl.constexpr,  # GQA padded to a tl.dot-friendly size (>= 16)
    HEAD_DIM: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,  # tokens per kv cache block
    BLOCK_N: tl.constexpr,
    SPLIT_K: tl.constexpr,  # num_splits > 1: write partials for the merge kernel
    SLIDING: tl.constexpr,  # a sliding-window layer (else every key is seen)
    FP8_KV: tl.constexpr,  # e4m3 cache: tiles are converted to q's dtype, the scales applied outside the loop
    DOT_PRECISION: tl.constexpr,
):
    # kv_head varies fastest so the Hkv programs of one (sequence, split) run together and jointly
    # read whole [block_size, Hkv, D] cache blocks: better DRAM locality than 256-byte rows alone.
    kv_head = tl.program_id(0)
    seq = tl.program_id(1)
    split = tl.program_id(2)
    seq64 = seq.to(tl.int64)

    # The keys the query sees, [kv_lo, seq_len), are cut into num_splits equal, BLOCK_N-long ranges; a
    # split past the end is empty (seq_len == 0 padding rows: all splits), and then touches neither
    # block table nor cache. Keys before a window are never loaded.
    seq_len = tl.load(seq_lens_ptr + seq)
    if SLIDING:
        kv_lo = tl.maximum(seq_len - window, 0)
    else:
        kv_lo = 0
    keys_per_split = tl.cdiv(tl.cdiv(seq_len - kv_lo, num_splits), BLOCK_N) * BLOCK_N
    lo = kv_lo + split * keys_per_split
    hi = tl.minimum(lo + keys_per_split, seq_len)

    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    mask_g = offs_g < GQA
    heads = kv_head * GQA + offs_g  # [BLOCK_G] query heads of this kv head
    q = tl.load(
        q_ptr + seq64 * stride_q_seq + heads[:, None] * stride_q_head + offs_d[None, :],
        mask=mask_g[:, None],
        other=0.0,
    )  # [BLOCK_G, D]

    if FP8_KV:
        qk_scale = qk_scale * tl.load(k_scale_ptr)  # q . (k * k_scale) == (q . k) * k_scale
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, HEAD_DIM], tl.float32)
    bt_row_ptr = block_tables_ptr + seq64 * stride_bt_seq
    kv_head_off = kv_head.to(tl.int64) * stride_cache_head
    for start in range(lo, hi, BLOCK_N):
        pos = start + offs_n
        mask_n = pos < hi
        kv_offs = paged_kv_tile_offsets(
            bt_row_ptr, pos, mask_n, kv_head_off, stride_cache_block, stride_cache_slot, BLOCK_SIZE, HEAD_DIM
        )
        k = tl.load(k_cache_ptr + kv_offs, mask=mask_n[:, None], other=0.0)  # [BLOCK_N, D]
        if FP8_KV:
            k = k.to(q.dtype)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale  # [BLOCK_G, BLOCK_N]
        s = tl.where(mask_n[None, :], s, float("-inf"))
        # The first key of every non-empty range is valid, so m_new is finite from the first tile on.
        p, alpha, m_new, l_i = online_softmax_weights(s, m_i, l_i, False)
        # Masked V rows load as 0: unused slots may hold anything, even NaN, and 0 * NaN is NaN.
        v = tl.load(v_cache_ptr + kv_offs, mask=mask_n[:, None], other=0.0)  # [BLOCK_N, D]
        if FP8_KV:
            v = v.to(q.dtype)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new

    if FP8_KV:
        acc = acc * tl.load(v_scale_ptr)  # sum p * (v * v_scale): once here, not per tile (the merge is linear in acc)
    if not SPLIT_K:
        out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]  # empty sequence: zeros
        tl.store(
            out_ptr + seq64 * stride_out_seq + heads[:, None] * stride_out_head + offs_d[None, :],
            out.to(out_ptr.dtype.element_ty),
            mask=mask_g[:, None],
        )
    else:
        rows = (seq64 * num_q_heads + heads) * num_splits + split  # [BLOCK_G]
        tl.store(part_acc_ptr + rows[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=mask_g[:, None])
        tl.store(part_max_ptr + rows, m_i, mask=mask_g)
        tl.store(part_sum_ptr + rows, l_i, mask=mask_g)


@triton.jit
def _decode_merge_kernel(
    part_acc_ptr,  # [B, Hq, num_splits, D] fp32
    part_max_ptr,  # [B, Hq, num_splits] fp32
    part_sum_ptr,  # [B, Hq, num_splits] fp32
    out_ptr,  # [B, Hq, D]
    num_q_heads,
    num_splits,
    stride_out_seq,
    stride_out_head,
    HEAD_DIM: tl.constexpr,
    BLOCK_S: tl.constexpr,  # num_splits padded to a power of two
):
    seq = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    row0 = (seq * num_q_heads + head) * num_splits
    out = merge_split_partials(part_acc_ptr, part_max_ptr, part_sum_ptr, row0, num_splits, HEAD_DIM, BLOCK_S)
    offs_d = tl.arange(0, HEAD_DIM)
    tl.store(out_ptr + seq * stride_out_seq + head * stride_out_head + offs_d, out.to(out_ptr.dtype.element_ty))


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    num_splits: int | None = None,
    *,
    max_seq_len: int | None = None,
    window: int | None = None,
    out: torch.Tensor | None = None,
    config: DecodeConfig | None = None,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """Decode attention over a paged KV cache; returns out [B, Hq, D] in q's dtype.

    q: [B, Hq, D], one query per sequence at position seq_lens[b] - 1 (last dim contiguous).
    k_cache, v_cache: [num_blocks, block_size, Hkv, D], contiguous, same dtype as q; or e4m3
    (torch.float8_e4m3fn) holding K / k_scale and V / v_scale (k_scale, v_scale: fp32 tensors of one
    element, read on the device).
    block_tables: int32 [B, max_blocks_per_seq]; seq_lens: int32 [B], keys per sequence including
    this step's token (already written to the cache). seq_lens[b] == 0 gives a zero output row.
    num_splits: split-K factor; None picks one from B, Hkv and max_seq_len (a host int: defaults to
    block_tables.shape[1] * block_size, an upper bound). No host syncs: safe to capture in a CUDA graph
    (num_splits is then fixed at capture time). window: a sliding-window layer's window (the query at
    p sees keys p - window + 1 .. p); None attends to every key. out: optional preallocated output.
    """
    check_paged_attention_inputs(q, k_cache, v_cache, block_tables, seq_lens, out, k_scale, v_scale)
    check_window(window)
    fp8_kv = k_scale is not None
    batch, num_q_heads, head_dim = q.shape
    if seq_lens.shape[0] != batch:
        raise ValueError(f"seq_lens has {seq_lens.shape[0]} entries for a batch of {batch} queries")
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    gqa = num_q_heads // num_kv_heads
    if out is None:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
    if batch == 0:
        return out
    if batch > 65535:  # grid axis 1 limit
        raise ValueError(f"batch {batch} exceeds 65535 sequences per decode launch")
    if max_seq_len is None:
        max_seq_len = block_tables.shape[1] * block_size
    if num_splits is None:
        keys = max_seq_len if window is None else min(max_seq_len, window)
        num_splits = choose_num_splits(batch, num_kv_heads, keys, q.device)
    if not 1 <= num_splits <= MAX_SPLITS:
        raise ValueError(f"num_splits must be in [1, {MAX_SPLITS}], got {num_splits}")
    cfg = config or decode_config(head_dim, q.dtype)

    part_acc, part_max, part_sum = split_partials(batch, num_q_heads, num_splits, head_dim, out)
    _decode_split_kernel[(num_kv_heads, batch, num_splits)](
        q,
        k_cache,
        v_cache,
        block_tables,
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
        num_splits,
        *paged_strides(q, out, block_tables, k_cache),
        GQA=gqa,
        BLOCK_G=max(16, triton.next_power_of_2(gqa)),
        HEAD_DIM=head_dim,
        BLOCK_SIZE=block_size,
        BLOCK_N=cfg.block_n,
        SPLIT_K=num_splits > 1,
        SLIDING=window is not None,
        FP8_KV=fp8_kv,
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )
    if num_splits > 1:
        _decode_merge_kernel[(batch, num_q_heads)](
            part_acc,
            part_max,
            part_sum,
            out,
            num_q_heads,
            num_splits,
            out.stride(0),
            out.stride(1),
            HEAD_DIM=head_dim,
            BLOCK_S=triton.next_power_of_2(num_splits),
            num_warps=4 if head_dim >= 128 else 2,
        )
    return out


def paged_attention_decode_ref(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    num_splits: int | None = None,
    *,
    max_seq_len: int | None = None,
    window: int | None = None,
    out: torch.Tensor | None = None,
    config: DecodeConfig | None = None,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """Pure-torch paged_attention_decode (same arguments; num_splits, max_seq_len, config ignored).

    Computes in fp32, one sequence at a time; reads seq_lens on the host (not graph-capturable).
    """
    batch, num_q_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    gqa = num_q_heads // num_kv_heads
    if out is None:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
    for seq, seq_len in enumerate(seq_lens.tolist()):
        if seq_len == 0:
            out[seq] = 0
            continue
        blocks = block_tables[seq, : triton.cdiv(seq_len, block_size)].long()
        first = 0 if window is None else max(0, seq_len - window)  # the query at seq_len - 1 sees keys first..
        # [L, Hkv, D] -> [Hq, L, D]: repeat each kv head for its G query heads.
        k = k_cache[blocks].flatten(0, 1)[first:seq_len].float().transpose(0, 1).repeat_interleave(gqa, dim=0)
        v = v_cache[blocks].flatten(0, 1)[first:seq_len].float().transpose(0, 1).repeat_interleave(gqa, dim=0)
        if k_scale is not None:  # an e4m3 cache holds K / k_scale and V / v_scale
            k, v = k * k_scale.float(), v * v_scale.float()
        scores = torch.einsum("hd,hld->hl", q[seq].float(), k) * scale  # [Hq, L]
        out[seq] = torch.einsum("hl,hld->hd", scores.softmax(dim=-1), v).to(out.dtype)
    return out
