import math

import pytest
import torch
from kernel_testing import DEVICE, DTYPES, PagedKV, assert_close, dense_attention, to_e4m3

from kernels.paged_attention_prefill import PrefillConfig, paged_attention_prefill, paged_attention_prefill_ref

# (q_len, seq_len): decode rows (q_len 1), whole prompts (q_len == seq_len), prefix hits / chunks.
MIXED = [(1, 1), (17, 17), (1, 33), (5, 33), (40, 100), (1, 100)]
# Sliding windows: 1 key, less than a block, one block, not a multiple of the block size or of a
# tile, and longer than every context.
WINDOWS = [1, 5, 16, 23, 1000]


def _prefill_case(lens, block_size, num_kv_heads, gqa, head_dim, dtype, **kv_kwargs):
    q_lens = [q for q, _ in lens]
    kv = PagedKV([s for _, s in lens], block_size, num_kv_heads, head_dim, dtype, DEVICE, **kv_kwargs)
    cu = torch.tensor([0] + torch.tensor(q_lens).cumsum(0).tolist(), dtype=torch.int32, device=DEVICE)
    # q as a view with a token stride larger than Hq * D, as when sliced out of a fused projection.
    q = torch.randn(sum(q_lens), num_kv_heads * gqa + 3, head_dim, dtype=dtype, device=DEVICE)[:, 3:]
    return kv, q, cu, max(q_lens)


def _run_both(kv, q, cu, max_q_len, scale, config=None, window=None):
    args = (q, kv.k_cache, kv.v_cache, kv.block_tables, cu, kv.seq_lens, scale, max_q_len)
    ref = paged_attention_prefill_ref(*args, window=window)
    if window is not None:  # the kernel must not even load a key that left every query's window
        kv.poison_before_windows((cu[1:] - cu[:-1]).tolist(), window)
    return paged_attention_prefill(*args, config=config, window=window), ref


@pytest.mark.parametrize(
    "block_size, num_kv_heads, gqa, head_dim",
    [(16, 2, 1, 64), (16, 1, 3, 64), (16, 2, 4, 128), (16, 1, 8, 64), (32, 2, 4, 64), (8, 1, 4, 64), (32, 1, 8, 128)],
)
def test_prefill_mixed_batch_matches_ref(block_size, num_kv_heads, gqa, head_dim, poison_empty):
    kv, q, cu, max_q_len = _prefill_case(MIXED, block_size, num_kv_heads, gqa, head_dim, torch.float32)
    out, ref = _run_both(kv, q, cu, max_q_len, head_dim**-0.5)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert_close(out, ref, torch.float32)


@pytest.mark.parametrize("config", [PrefillConfig(16, 16, 4, 1), PrefillConfig(64, 32, 4, 2)])
def test_prefill_tile_sizes(config, poison_empty):
    """Tiles smaller and larger than a prompt, and several tiles per sequence."""
    kv, q, cu, max_q_len = _prefill_case([(37, 37), (2, 50), (23, 29)], 16, 2, 4, 64, torch.float32)
    out, ref = _run_both(kv, q, cu, max_q_len, 0.125, config)
    assert_close(out, ref, torch.float32)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("block_size, num_kv_heads, gqa", [(16, 2, 4), (8, 1, 3), (32, 2, 1)])
def test_prefill_sliding_window_matches_ref(block_size, num_kv_heads, gqa, window, poison_empty):
    kv, q, cu, max_q_len = _prefill_case(MIXED + [(70, 300)], block_size, num_kv_heads, gqa, 64, torch.float32)
    out, ref = _run_both(kv, q, cu, max_q_len, 0.125, window=window)
    assert_close(out, ref, torch.float32)


@pytest.mark.parametrize("config", [PrefillConfig(16, 16, 4, 1), PrefillConfig(64, 16, 4, 1), PrefillConfig(64, 32, 4, 2)])
@pytest.mark.parametrize("window", [3, 20])
def test_prefill_sliding_window_tile_sizes(config, window, poison_empty):
    """Tiles of more tokens than keys per step (64 x 16): a row's window may start past the first
    tiles of keys its tile walks, and it must come out of them with nothing, not NaN."""
    kv, q, cu, max_q_len = _prefill_case([(64, 64), (37, 90), (2, 50)], 16, 1, 1, 64, torch.float32)
    out, ref = _run_both(kv, q, cu, max_q_len, 0.125, config, window=window)
    assert_close(out, ref, torch.float32)


@pytest.mark.parametrize("window", [1, 23, 1000])
def test_prefill_ref_sliding_window_matches_dense(window):
    kv, q, cu, max_q_len = _prefill_case(MIXED, 16, 2, 3, 64, torch.float32)
    ref = paged_attention_prefill_ref(q, kv.k_cache, kv.v_cache, kv.block_tables, cu, kv.seq_lens, 0.2,
                                      window=window)
    for b in range(len(MIXED)):
        rows = slice(int(cu[b]), int(cu[b + 1]))
        dense = dense_attention(q[rows], kv.keys[b], kv.values[b], 0.2, window)
        torch.testing.assert_close(ref[rows].double().cpu(), dense, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_prefill_dtypes(dtype, poison_empty):
    kv, q, cu, max_q_len = _prefill_case([(70, 70), (1, 200), (33, 150)], 16, 2, 4, 128, dtype)
    out, ref = _run_both(kv, q, cu, max_q_len, 0.1)
    assert out.dtype == dtype
    assert_close(out, ref, dtype)


@pytest.mark.parametrize("gqa", [1, 3, 8])
def test_prefill_ref_matches_dense(gqa):
    kv, q, cu, max_q_len = _prefill_case(MIXED, 16, 2, gqa, 64, torch.float32)
    ref = paged_attention_prefill_ref(q, kv.k_cache, kv.v_cache, kv.block_tables, cu, kv.seq_lens, 0.2, max_q_len)
    for b in range(len(MIXED)):
        rows = slice(int(cu[b]), int(cu[b + 1]))
        dense = dense_attention(q[rows], kv.keys[b], kv.values[b], 0.2)
        torch.testing.assert_close(ref[rows].double().cpu(), dense, atol=1e-5, rtol=1e-5)


def test_prefill_empty_sequences_and_padding_tokens(poison_empty):
    """Sequences with no new tokens are skipped; rows of q past cu_seqlens_q[B] are left alone."""
    kv, q, cu, max_q_len = _prefill_case([(0, 0), (9, 20), (0, 16), (3, 3)], 16, 2, 4, 64, torch.float32, table_fill=-1)
    q = torch.cat([q, torch.randn(4, *q.shape[1:], device=DEVICE)])  # 4 padding tokens at the end
    out = torch.full_like(q, math.nan)
    paged_attention_prefill(q, kv.k_cache, kv.v_cache, kv.block_tables, cu, kv.seq_lens, 0.125, max_q_len, out=out)
    ref = paged_attention_prefill_ref(q, kv.k_cache, kv.v_cache, kv.block_tables, cu, kv.seq_lens, 0.125, max_q_len)
    num_real = int(cu[-1])
    assert_close(out[:num_real], ref[:num_real], torch.float32)
    assert out[num_real:].isnan().all()


def test_prefill_top_of_huge_pool(huge_pool, poison_empty):
    """Block ids near the top of a pool whose element offsets pass 2**31."""
    lens = [(20, 20), (3, 50)]
    kv, q, cu, max_q_len = _prefill_case(lens, 16, 1, 4, 64, torch.float16, caches=huge_pool, top_of_pool=True)
    assert int(kv.block_tables[:, 0].long().min()) * kv.k_cache.stride(0) > 2**31
    out, ref = _run_both(kv, q, cu, max_q_len, 0.125)
    assert_close(out, ref, torch.float16)


def test_prefill_rejects_bad_inputs():
    kv, q, cu, max_q_len = _prefill_case([(3, 5), (2, 2)], 16, 2, 4, 64, torch.float32)
    args = [q, kv.k_cache, kv.v_cache, kv.block_tables, cu, kv.seq_lens, 0.1, max_q_len]
    with pytest.raises(TypeError, match="cu_seqlens_q"):
        paged_attention_prefill(*args[:4], cu.long(), *args[5:])
    with pytest.raises(ValueError, match="cu_seqlens_q"):
        paged_attention_prefill(*args[:4], cu[:-1], *args[5:])
    with pytest.raises(TypeError, match="q has dtype"):
        paged_attention_prefill(q.double(), *args[1:])
    with pytest.raises(ValueError, match="contiguous"):
        paged_attention_prefill(*args[:5], kv.seq_lens.repeat_interleave(2)[::2], *args[6:])
    with pytest.raises(ValueError, match="window"):
        paged_attention_prefill(*args, window=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("window", [None, 23])
def test_prefill_reads_e4m3_cache(dtype, window, poison_empty):
    """An e4m3 cache with scales != 1 in a mixed batch: the kernel equals its reference, and the
    reference equals attention over the dequantized values (e4m3 * scale) in a float cache."""
    kv, q, cu, max_q_len = _prefill_case([(1, 40), (37, 37), (9, 120), (1, 1)], 16, 2, 4, 64, dtype)
    k_scale, v_scale = to_e4m3(kv, 0.03, 2.5)
    args = (q, kv.k_cache, kv.v_cache, kv.block_tables, cu, kv.seq_lens, 0.125, max_q_len)
    ref = paged_attention_prefill_ref(*args, window=window, k_scale=k_scale, v_scale=v_scale)
    dequantized = paged_attention_prefill_ref(q, kv.k_cache.float() * 0.03, kv.v_cache.float() * 2.5, *args[3:],
                                              window=window)
    torch.testing.assert_close(ref.float(), dequantized.float(), atol=0, rtol=0)
    if window is not None:
        kv.poison_before_windows((cu[1:] - cu[:-1]).tolist(), window)
    out = paged_attention_prefill(*args, window=window, k_scale=k_scale, v_scale=v_scale)
    assert out.dtype == dtype
    assert_close(out, ref, dtype)
    with pytest.raises(ValueError, match="v_scale"):
        paged_attention_prefill(*args, k_scale=k_scale)
