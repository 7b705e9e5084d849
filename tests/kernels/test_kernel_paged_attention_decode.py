import math

import pytest
import torch
from kernel_testing import (
    DEVICE,
    DTYPES,
    PagedKV,
    assert_close,
    capture_without_host_sync,
    dense_attention,
    to_e4m3,
)

from kernels.paged_attention_decode import choose_num_splits, paged_attention_decode, paged_attention_decode_ref

SEQ_LENS = [1, 17, 33, 100]
# Sliding windows: 1 key, less than a block, one block, not a multiple of the block size or of a
# tile, and longer than every context.
WINDOWS = [1, 5, 16, 23, 1000]


def _decode_case(seq_lens, block_size, num_kv_heads, gqa, head_dim, dtype, **kv_kwargs):
    kv = PagedKV(seq_lens, block_size, num_kv_heads, head_dim, dtype, DEVICE, **kv_kwargs)
    # q as a view with a token stride larger than Hq * D, as when sliced out of a fused projection.
    q = torch.randn(len(seq_lens), 2 * num_kv_heads * gqa, head_dim, dtype=dtype, device=DEVICE)[:, ::2]
    return kv, q


def _run_both(kv, q, scale, num_splits, max_seq_len=None, window=None):
    args = (q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, scale)
    ref = paged_attention_decode_ref(*args, window=window)
    if window is not None:  # the kernel must not even load a key that left the window
        kv.poison_before_windows([1] * q.shape[0], window)
    out = paged_attention_decode(*args, num_splits, max_seq_len=max_seq_len, window=window)
    return out, ref


@pytest.mark.parametrize(
    "block_size, num_kv_heads, gqa, head_dim",
    [(16, 2, 1, 64), (16, 1, 3, 64), (16, 2, 4, 128), (16, 1, 8, 64), (32, 2, 4, 64), (8, 1, 4, 64), (32, 1, 8, 128)],
)
@pytest.mark.parametrize("num_splits", [1, 3, None])
def test_decode_matches_ref(block_size, num_kv_heads, gqa, head_dim, num_splits, poison_empty):
    kv, q = _decode_case(SEQ_LENS, block_size, num_kv_heads, gqa, head_dim, torch.float32)
    scale = head_dim**-0.5
    out, ref = _run_both(kv, q, scale, num_splits, max_seq_len=max(SEQ_LENS))
    assert out.shape == q.shape and out.dtype == q.dtype
    assert_close(out, ref, torch.float32)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("block_size, num_kv_heads, gqa, head_dim", [(16, 2, 4, 64), (8, 1, 3, 64), (32, 2, 1, 128)])
@pytest.mark.parametrize("num_splits", [1, 3, None])
def test_decode_sliding_window_matches_ref(block_size, num_kv_heads, gqa, head_dim, num_splits, window, poison_empty):
    kv, q = _decode_case(SEQ_LENS + [250], block_size, num_kv_heads, gqa, head_dim, torch.float32)
    out, ref = _run_both(kv, q, head_dim**-0.5, num_splits, max_seq_len=250, window=window)
    assert_close(out, ref, torch.float32)


@pytest.mark.parametrize("window", [1, 23, 1000])
def test_decode_ref_sliding_window_matches_dense(window):
    kv, q = _decode_case(SEQ_LENS, 16, 2, 4, 64, torch.float32)
    ref = paged_attention_decode_ref(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.3, window=window)
    for b in range(len(SEQ_LENS)):
        dense = dense_attention(q[b : b + 1], kv.keys[b], kv.values[b], 0.3, window)[0]
        torch.testing.assert_close(ref[b].double().cpu(), dense, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_decode_dtypes(dtype, poison_empty):
    kv, q = _decode_case([5, 64, 129, 300], 16, 2, 4, 128, dtype)
    out, ref = _run_both(kv, q, 0.1, None)
    assert out.dtype == dtype
    assert_close(out, ref, dtype)


@pytest.mark.parametrize("gqa", [1, 3, 8])
def test_decode_ref_matches_dense(gqa):
    kv, q = _decode_case(SEQ_LENS, 16, 2, gqa, 64, torch.float32)
    ref = paged_attention_decode_ref(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.3)
    for b in range(len(SEQ_LENS)):
        dense = dense_attention(q[b : b + 1], kv.keys[b], kv.values[b], 0.3)[0]
        torch.testing.assert_close(ref[b].double().cpu(), dense, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("num_splits", [1, 4])
def test_decode_zero_length_padding_rows(num_splits, poison_empty):
    """CUDA-graph padding rows: seq_len 0 and a garbage (-1) block table; output must be zeros."""
    kv, q = _decode_case([0, 40, 0, 7], 16, 2, 4, 64, torch.float32, table_fill=-1)
    out, ref = _run_both(kv, q, 0.125, num_splits)
    assert_close(out, ref, torch.float32)
    assert torch.equal(out[0], torch.zeros_like(out[0])) and torch.equal(out[2], torch.zeros_like(out[2]))


def test_decode_top_of_huge_pool(huge_pool, poison_empty):
    """Block ids near the top of a pool whose element offsets pass 2**31."""
    kv, q = _decode_case([1, 17, 100], 16, 1, 4, 64, torch.float16, caches=huge_pool, top_of_pool=True)
    offsets = kv.block_tables[:, 0].long() * kv.k_cache.stride(0)
    assert int(offsets.min()) > 2**31
    for num_splits in (1, 3):
        out, ref = _run_both(kv, q, 0.125, num_splits)
        assert_close(out, ref, torch.float16)


def test_decode_out_argument(poison_empty):
    kv, q = _decode_case([9, 50], 16, 2, 4, 64, torch.float32)
    out = torch.full_like(q, math.nan).contiguous()
    result = paged_attention_decode(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.2, 2, out=out)
    assert result is out
    ref = paged_attention_decode_ref(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.2)
    assert_close(out, ref, torch.float32)


def test_choose_num_splits():
    cuda = torch.device("cuda")  # only used as a key: the SM count is looked up when CUDA exists
    if not torch.cuda.is_available():
        cpu = torch.device("cpu")
        assert choose_num_splits(1, 8, 4096, cpu) > 1
        assert choose_num_splits(256, 8, 4096, cpu) == 1
        assert choose_num_splits(1, 8, 100, cpu) == 1  # too short to be worth splitting
        return
    assert choose_num_splits(1, 8, 4096, cuda) >= 16
    assert choose_num_splits(256, 8, 4096, cuda) == 1
    assert choose_num_splits(1, 8, 64, cuda) == 1


def test_decode_rejects_bad_inputs():
    kv, q = _decode_case([3, 20], 16, 2, 4, 64, torch.float32)
    args = [q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.1]
    with pytest.raises(TypeError, match="seq_lens"):
        paged_attention_decode(*args[:4], kv.seq_lens.long(), 0.1)
    with pytest.raises(TypeError, match="block_tables"):
        paged_attention_decode(*args[:3], kv.block_tables.long(), *args[4:])
    with pytest.raises(ValueError, match="multiple of kv heads"):
        paged_attention_decode(q[:, :7].contiguous(), *args[1:])
    with pytest.raises(ValueError, match="stride 1"):
        paged_attention_decode(q.transpose(1, 2).contiguous().transpose(1, 2), *args[1:])
    with pytest.raises(ValueError, match="contiguous"):
        paged_attention_decode(q, kv.k_cache.transpose(0, 1), kv.v_cache.transpose(0, 1), *args[3:])
    with pytest.raises(ValueError, match="head_dim"):
        bad = torch.zeros(4, 16, 2, 80)
        paged_attention_decode(torch.zeros(2, 8, 80), bad, bad, *args[3:])
    for window in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="window"):
            paged_attention_decode(*args, window=window)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_decode_cuda_graph_without_host_sync():
    kv, q = _decode_case([1, 17, 33, 100], 16, 2, 4, 128, torch.bfloat16)
    seq_lens = kv.seq_lens.clone()
    out = torch.empty_like(q)

    def step():
        paged_attention_decode(q, kv.k_cache, kv.v_cache, kv.block_tables, seq_lens, 0.1, max_seq_len=128, out=out)

    graph = capture_without_host_sync(step)
    seq_lens.copy_(torch.tensor([0, 16, 33, 99], dtype=torch.int32))
    graph.replay()
    ref = paged_attention_decode_ref(q, kv.k_cache, kv.v_cache, kv.block_tables, seq_lens, 0.1)
    assert_close(out, ref, torch.bfloat16)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_splits", [1, 3])
@pytest.mark.parametrize("window", [None, 23])
def test_decode_reads_e4m3_cache(dtype, num_splits, window, poison_empty):
    """An e4m3 cache with scales != 1: the kernel equals its reference, and the reference equals
    attention over the dequantized values (e4m3 * scale) in a float cache."""
    kv, q = _decode_case(SEQ_LENS + [250], 16, 2, 4, 64, dtype)
    k_scale, v_scale = to_e4m3(kv, 0.03, 2.5)
    args = (q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.125)
    ref = paged_attention_decode_ref(*args, window=window, k_scale=k_scale, v_scale=v_scale)
    dequantized = paged_attention_decode_ref(q, kv.k_cache.float() * 0.03, kv.v_cache.float() * 2.5,
                                             *args[3:], window=window)
    torch.testing.assert_close(ref.float(), dequantized.float(), atol=0, rtol=0)
    if window is not None:
        kv.poison_before_windows([1] * q.shape[0], window)
    out = paged_attention_decode(q, kv.k_cache, kv.v_cache, *args[3:], num_splits, max_seq_len=250,
                                 window=window, k_scale=k_scale, v_scale=v_scale)
    assert out.dtype == dtype
    assert_close(out, ref, dtype)


def test_decode_e4m3_cache_needs_scales():
    kv, q = _decode_case([5], 16, 2, 4, 64, torch.float32)
    k_scale, v_scale = to_e4m3(kv, 1.0, 1.0)
    args = (q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.125)
    with pytest.raises(ValueError, match="k_scale"):
        paged_attention_decode(*args)
    with pytest.raises(ValueError, match="one element"):
        paged_attention_decode(*args, k_scale=k_scale.expand(2), v_scale=v_scale)
