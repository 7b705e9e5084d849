"""Triton helpers shared by the paged attention kernels (inlined into the callers)."""

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
