"""Triton helpers shared by the paged attention kernels (inlined into the callers)."""

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
    block_ids = tl.load(block_table_row_ptr + pos // BLOCK_SIZE, mask=mask, other=0).to(tl.int64)
    row = block_ids * stride_cache_block + (pos % BLOCK_SIZE).to(tl.int64) * stride_cache_slot + kv_head_off
    return row[:, None] + tl.arange(0, HEAD_DIM)[None, :]


@triton.jit
def merge_split_rows(
    part_acc_ptr,  # [rows, Hq, num_splits, D] fp32: unnormalised sum of p * v per split
    part_max_ptr,  # [rows, Hq, num_splits] fp32: the split's max log2-domain score (-inf: it saw no key)
    part_sum_ptr,  # [rows, Hq, num_splits] fp32: the split's sum of exp2(score - max)
    first,  # [BLOCK_M] int64 index of split 0 of each (row, head) of a tile
    mask,  # [BLOCK_M] rows that exist
    num_splits,
    HEAD_DIM: tl.constexpr,
):
    """The split-KV merge of a whole tile of rows, inside the kernel that wrote the partials: returns
    the unnormalised [BLOCK_M, D] sum of w_s acc_s and the [BLOCK_M] sum of w_s l_s, w_s = 2^(m_s - max).

    Run by the tile's last program after the others published their partials: the loads bypass L1
    (.cg), which may hold no line of them, but is not coherent with the other SMs' stores.
    """
    m_max = tl.load(part_max_ptr + first, mask=mask, other=float("-inf"), cache_modifier=".cg")
    for s in range(1, num_splits):
        m_s = tl.load(part_max_ptr + first + s, mask=mask, other=float("-inf"), cache_modifier=".cg")
        m_max = tl.maximum(m_max, m_s)
    m_max = tl.where(m_max > float("-inf"), m_max, 0.0)  # a row no split saw: every weight is 0
    offs_d = tl.arange(0, HEAD_DIM)
    acc = tl.zeros([first.shape[0], HEAD_DIM], tl.float32)
    denom = tl.zeros([first.shape[0]], tl.float32)
    for s in range(0, num_splits):
        m = tl.load(part_max_ptr + first + s, mask=mask, other=float("-inf"), cache_modifier=".cg")
        live = mask & (m > float("-inf"))  # a split that saw no key left its sum and acc unwritten
        w = tl.where(live, tl.exp2(m - m_max), 0.0)
        l = tl.load(part_sum_ptr + first + s, mask=live, other=0.0, cache_modifier=".cg")
        a = tl.load(
            part_acc_ptr + (first + s)[:, None] * HEAD_DIM + offs_d[None, :],
            mask=live[:, None], other=0.0, cache_modifier=".cg",
        )
        denom += w * l
        acc += a * w[:, None]
    return acc, denom


_TICKETS: dict[torch.device, list[torch.Tensor]] = {}


def split_tickets(count: int, device: torch.device) -> torch.Tensor:
    """A zeroed int32 [>= count] buffer of per-tile tickets for a split-KV kernel that merges in place.

    The kernels leave it zeroed (each tile's last program resets its ticket), so one buffer per device
    serves every launch, and a CUDA graph that captured it needs no memset node. It only grows: a graph
    may hold a pointer to an older one, so those are kept alive.
    """
    buffers = _TICKETS.setdefault(device, [])
    if not buffers or buffers[-1].numel() < count:
        buffers.append(torch.zeros(max(count, 4096), dtype=torch.int32, device=device))
    return buffers[-1]
