"""unpack_step_row: a captured prefill step's positions, slots and int32 metadata from its staged row."""
import numpy as np
import pytest
import torch
from kernel_testing import DEVICE

from kernels.step_row import unpack_step_row, unpack_step_row_ref

MAX_ROWS = 128


def staged_row(start, q_len, table, seq_len=None):
    row = torch.full((MAX_ROWS + 3 + len(table),), 7, dtype=torch.int64)  # stale token ids: never read here
    row[MAX_ROWS:MAX_ROWS + 3] = torch.tensor([start + q_len if seq_len is None else seq_len, q_len, start])
    row[MAX_ROWS + 3:] = torch.tensor(table)
    return row.to(DEVICE)


def outputs(rows, width):
    i64, i32 = torch.int64, torch.int32
    return (torch.full((rows,), 99, dtype=i64, device=DEVICE), torch.full((rows,), 99, dtype=i64, device=DEVICE),
            torch.zeros(1, dtype=i32, device=DEVICE), torch.zeros(2, dtype=i32, device=DEVICE),
            torch.zeros(width, dtype=i32, device=DEVICE), torch.zeros(1, dtype=i64, device=DEVICE))


@pytest.mark.parametrize("fn", [unpack_step_row, unpack_step_row_ref])
@pytest.mark.parametrize("start, q_len, rows, block_size, width", [
    (2000, 50, 64, 16, 144),  # a chat turn after a pinned 2,000-token system prompt
    (0, 16, 16, 16, 4),  # no cached prefix, exactly one full graph size
    (13, 100, 128, 16, 20),  # starts mid-block, spans block boundaries
    (31, 1, 16, 32, 3),  # one row; the largest size's padding
    (5000, 3, 16, 16, 3000),  # a table wider than one BLOCK_W chunk of the kernel
])
def test_positions_slots_and_metadata_match_the_host_formula(fn, start, q_len, rows, block_size, width):
    rng = np.random.default_rng(start + q_len)
    table = rng.permutation(10 * width)[:width].tolist()  # shuffled, distinct block ids
    positions, slots, seq_lens, cu, block_table, last = outputs(rows, width)
    fn(staged_row(start, q_len, table), positions, slots, seq_lens, cu, block_table, last, MAX_ROWS, block_size)
    pos = np.arange(start, start + q_len)
    want_slots = np.asarray(table)[pos // block_size] * block_size + pos % block_size  # the old host staging
    assert positions.cpu().tolist() == pos.tolist() + [0] * (rows - q_len)  # padding rows: position 0...
    assert slots.cpu().tolist() == want_slots.tolist() + [-1] * (rows - q_len)  # ...and no cache slot
    assert seq_lens.tolist() == [start + q_len] and cu.tolist() == [0, q_len] and last.tolist() == [q_len - 1]
    assert block_table.cpu().tolist() == table


@pytest.mark.parametrize("fn", [unpack_step_row, unpack_step_row_ref])
def test_a_row_of_no_tokens_writes_no_slot(fn):
    """PrefillGraphs captures with q_len 0: every row is padding, so warm-up and capture write no K/V."""
    positions, slots, seq_lens, cu, block_table, last = outputs(16, 4)
    fn(staged_row(0, 0, [5, 6, 7, 8], seq_len=1), positions, slots, seq_lens, cu, block_table, last, MAX_ROWS, 16)
    assert slots.cpu().tolist() == [-1] * 16 and positions.cpu().tolist() == [0] * 16
    assert cu.tolist() == [0, 0] and last.tolist() == [0] and seq_lens.tolist() == [1]


def test_bad_buffers_are_rejected():
    positions, slots, seq_lens, cu, block_table, last = outputs(16, 4)
    row = staged_row(0, 4, [1, 2, 3, 4])
    with pytest.raises(TypeError, match="dtype"):
        unpack_step_row(row, positions.int(), slots, seq_lens, cu, block_table, last, MAX_ROWS, 16)
    with pytest.raises(ValueError, match="row has shape"):
        unpack_step_row(row[:-1], positions, slots, seq_lens, cu, block_table, last, MAX_ROWS, 16)
    with pytest.raises(ValueError, match="rows <= max_rows"):
        unpack_step_row(row, positions, slots[:8], seq_lens, cu, block_table, last, MAX_ROWS, 16)
