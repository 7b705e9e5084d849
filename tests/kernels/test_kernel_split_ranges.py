"""split_key_range: how the split-KV prefill kernel cuts a sequence's keys into ranges."""
import pytest
import torch
import triton
import triton.language as tl
from kernel_testing import DEVICE

from kernels._paged import split_key_range


@triton.jit
def _ranges_kernel(seq_lens_ptr, out_ptr, num_splits, BLOCK_N: tl.constexpr):
    seq, split = tl.program_id(0), tl.program_id(1)
    lo, hi = split_key_range(tl.load(seq_lens_ptr + seq), split, num_splits, BLOCK_N)
    tl.store(out_ptr + (seq * num_splits + split) * 2, lo)
    tl.store(out_ptr + (seq * num_splits + split) * 2 + 1, hi)


def ranges(seq_lens: list[int], num_splits: int, block_n: int) -> list[list[tuple[int, int]]]:
    lens = torch.tensor(seq_lens, dtype=torch.int32, device=DEVICE)
    out = torch.full((len(seq_lens), num_splits, 2), -1, dtype=torch.int32, device=DEVICE)
    _ranges_kernel[(len(seq_lens), num_splits)](lens, out, num_splits, BLOCK_N=block_n)
    return [[tuple(r) for r in seq] for seq in out.tolist()]


@pytest.mark.parametrize("block_n", [32, 64])
@pytest.mark.parametrize("num_splits", [1, 3, 8, 64])
def test_ranges_partition_the_keys_in_whole_tiles_as_evenly_as_tiles_allow(num_splits, block_n):
    seq_lens = [0, 1, block_n - 1, block_n, 2050, 3 * block_n * num_splits + 5, 8192]
    for seq_len, cuts in zip(seq_lens, ranges(seq_lens, num_splits, block_n)):
        position = 0
        for lo, hi in cuts:  # consecutive, in order, covering [0, seq_len) exactly
            assert lo == position and lo <= hi <= seq_len, (seq_len, cuts)
            assert lo % block_n == 0 or lo == hi == seq_len, (seq_len, cuts)  # empty ranges sit at the end
            position = hi
        assert position == seq_len, (seq_len, cuts)
        tiles = [triton.cdiv(hi - lo, block_n) for lo, hi in cuts]
        assert max(tiles) - min(tiles) <= 1, (seq_len, tiles)
        assert tiles == sorted(tiles, reverse=True), (seq_len, tiles)  # the longer ranges come first


def test_chat_turn_keys_fill_every_split():
    """2,050 keys (2,000 cached + 50 new) in 8 splits of 64-key tiles: 33 tiles, none of the 8 empty
    (rounding each range up to whole tiles gave 7 ranges of 5 tiles and an empty eighth)."""
    (cuts,) = ranges([2050], 8, 64)
    assert [triton.cdiv(hi - lo, 64) for lo, hi in cuts] == [5, 4, 4, 4, 4, 4, 4, 4]
