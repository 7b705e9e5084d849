"""Unpack a single-sequence step's staged row on the device: positions, cache slots, int32 metadata.

A captured prefill step (a chat turn after a cached prefix) gets its inputs as one int64 row that the
host fills and one copy moves: [token ids (max_rows), seq_len, q_len, start, block table (width)].
The host writes only what it cannot avoid (the new tokens and the block table); this kernel derives
the rest inside the graph: row r < q_len sits at position start + r in cache slot
table[pos // block_size] * block_size + pos % block_size; rows past q_len are padding (position 0,
slot -1: written nowhere). On an H200's host each numpy or torch call there costs 5-20 µs, and the
positions, slots and three int32 conversions were ~10 of them per chat turn.
"""

import torch
import triton
import triton.language as tl

from kernels._checks import check_contiguous, check_device, check_dtype, check_shape


@triton.jit
def _unpack_step_row_kernel(
    row_ptr,  # [max_rows + 3 + width] int64
    positions_ptr,  # [num_rows] int64
    slots_ptr,  # [num_rows] int64
    seq_lens_ptr,  # [1] int32
    cu_seqlens_q_ptr,  # [2] int32: [0, q_len]
    block_table_ptr,  # [width] int32
    last_index_ptr,  # [1] int64: the row whose logits are sampled
    num_rows,
    width,
    TAIL: tl.constexpr,  # offset of [seq_len, q_len, start] in the row (= max_rows)
    BLOCK_SIZE: tl.constexpr,  # tokens per KV-cache block
    BLOCK_R: tl.constexpr,
    BLOCK_W: tl.constexpr,
):
    seq_len = tl.load(row_ptr + TAIL)
    q_len = tl.load(row_ptr + TAIL + 1)
    start = tl.load(row_ptr + TAIL + 2)
    rows = tl.arange(0, BLOCK_R)
    live = rows < num_rows
    real = rows < q_len
    pos = tl.where(real, start + rows, 0)
    block = tl.load(row_ptr + TAIL + 3 + pos // BLOCK_SIZE, mask=live & real, other=0)
    tl.store(positions_ptr + rows, pos, mask=live)
    tl.store(slots_ptr + rows, tl.where(real, block * BLOCK_SIZE + pos % BLOCK_SIZE, -1), mask=live)
    tl.store(seq_lens_ptr, seq_len.to(tl.int32))
    tl.store(cu_seqlens_q_ptr + 1, q_len.to(tl.int32))
    tl.store(last_index_ptr, tl.maximum(q_len - 1, 0))
    for w in range(0, width, BLOCK_W):
        cols = w + tl.arange(0, BLOCK_W)
        ids = tl.load(row_ptr + TAIL + 3 + cols, mask=cols < width)
        tl.store(block_table_ptr + cols, ids.to(tl.int32), mask=cols < width)


def _check(row, positions, slots, seq_lens, cu_seqlens_q, block_table, last_index, max_rows):
    for name, t, dtype in (("row", row, torch.int64), ("positions", positions, torch.int64),
                           ("slots", slots, torch.int64), ("seq_lens", seq_lens, torch.int32),
                           ("cu_seqlens_q", cu_seqlens_q, torch.int32), ("block_table", block_table, torch.int32),
                           ("last_index", last_index, torch.int64)):
        check_dtype(name, t, (dtype,))
        check_contiguous(name, t)
        check_device(name, t, row.device)
    check_shape("seq_lens", seq_lens, (1,))
    check_shape("cu_seqlens_q", cu_seqlens_q, (2,))
    check_shape("last_index", last_index, (1,))
    if positions.shape != slots.shape or positions.dim() != 1 or positions.shape[0] > max_rows:
        raise ValueError(f"positions {tuple(positions.shape)} and slots {tuple(slots.shape)} must be [rows], "
                         f"rows <= max_rows ({max_rows})")
    if row.dim() != 1 or row.shape[0] != max_rows + 3 + block_table.shape[0]:
        raise ValueError(f"row has shape {tuple(row.shape)}, expected ({max_rows} + 3 + {block_table.shape[0]},)")


def unpack_step_row(row, positions, slots, seq_lens, cu_seqlens_q, block_table, last_index, max_rows: int,
                    block_size: int) -> None:
    """Fill positions/slots [rows], seq_lens [1], cu_seqlens_q[1], block_table [width] and last_index [1]
    from row = [token ids (max_rows), seq_len, q_len, start, block table (width)]. One program; no sync."""
    _check(row, positions, slots, seq_lens, cu_seqlens_q, block_table, last_index, max_rows)
    width = block_table.shape[0]
    _unpack_step_row_kernel[(1,)](
        row, positions, slots, seq_lens, cu_seqlens_q, block_table, last_index, positions.shape[0], width,
        TAIL=max_rows, BLOCK_SIZE=block_size, BLOCK_R=triton.next_power_of_2(max(max_rows, 16)),
        BLOCK_W=min(1024, triton.next_power_of_2(max(width, 16))), num_warps=4,
    )


def unpack_step_row_ref(row, positions, slots, seq_lens, cu_seqlens_q, block_table, last_index, max_rows: int,
                        block_size: int) -> None:
    """Pure-torch unpack_step_row (same arguments and results)."""
    _check(row, positions, slots, seq_lens, cu_seqlens_q, block_table, last_index, max_rows)
    seq_len, q_len, start = row[max_rows:max_rows + 3]
    rows = torch.arange(positions.shape[0], device=row.device)
    real = rows < q_len
    pos = torch.where(real, start + rows, 0)
    table = row[max_rows + 3:]
    positions.copy_(pos)
    slots.copy_(torch.where(real, table[pos // block_size] * block_size + pos % block_size, -1))
    seq_lens.copy_(seq_len.view(1))
    cu_seqlens_q[1:].copy_(q_len.view(1))
    last_index.copy_((q_len - 1).clamp(min=0).view(1))
    block_table.copy_(table)
