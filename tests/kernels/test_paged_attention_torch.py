"""The batched torch paged attention (the engine's CPU path) against the per-sequence references and an
independent float64 attention, on NaN-poisoned caches."""
import pytest
import torch
from kernel_testing import PagedKV, assert_close, dense_attention, to_e4m3

from kernels.paged_attention_decode import paged_attention_decode_ref
from kernels.paged_attention_prefill import paged_attention_prefill_ref
from kernels.paged_attention_torch import paged_attention_torch, plan_paged_attention

# (q_len, seq_len): decode rows, whole prompts, a prefix hit, chunks of unequal lengths.
MIXED = [(1, 1), (17, 17), (1, 33), (5, 33), (40, 100), (1, 100), (3, 3)]


def _case(lens, block_size, num_kv_heads, gqa, head_dim, **kv_kwargs):
    q_lens = [q for q, _ in lens]
    kv = PagedKV([s for _, s in lens], block_size, num_kv_heads, head_dim, torch.float32, torch.device("cpu"),
                 **kv_kwargs)
    cu = torch.tensor([0] + torch.tensor(q_lens).cumsum(0).tolist(), dtype=torch.int32)
    # q as a strided view, as when sliced out of the fused qkv projection.
    q = torch.randn(sum(q_lens), num_kv_heads * gqa + 3, head_dim)[:, 3:]
    return kv, q, cu


def _batched(q, kv, cu, block_size, scale, window=None):
    plan = plan_paged_attention(kv.block_tables, kv.seq_lens, cu, block_size, q.shape[0], q.dtype, window)
    return paged_attention_torch(q, kv.k_cache, kv.v_cache, plan, scale)


@pytest.mark.parametrize("block_size, num_kv_heads, gqa, head_dim",
                         [(16, 2, 1, 64), (16, 3, 3, 64), (8, 1, 4, 64), (32, 2, 4, 128), (16, 1, 8, 64)])
def test_mixed_batch_matches_prefill_ref(block_size, num_kv_heads, gqa, head_dim):
    kv, q, cu = _case(MIXED, block_size, num_kv_heads, gqa, head_dim)
    out = _batched(q, kv, cu, block_size, head_dim**-0.5)
    ref = paged_attention_prefill_ref(q, kv.k_cache, kv.v_cache, kv.block_tables, cu, kv.seq_lens, head_dim**-0.5)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert_close(out, ref, torch.float32)


@pytest.mark.parametrize("window", [1, 5, 16, 23, 1000])
@pytest.mark.parametrize("block_size, num_kv_heads, gqa", [(16, 2, 4), (8, 1, 3)])
def test_sliding_window_matches_prefill_ref(block_size, num_kv_heads, gqa, window):
    """Only the keys from each sequence's first window on are gathered: the poisoned ones before it
    must not reach the output."""
    kv, q, cu = _case(MIXED + [(4, 90)], block_size, num_kv_heads, gqa, 64)
    ref = paged_attention_prefill_ref(q, kv.k_cache, kv.v_cache, kv.block_tables, cu, kv.seq_lens, 0.125,
                                      window=window)
    kv.poison_before_windows((cu[1:] - cu[:-1]).tolist(), window)
    assert_close(_batched(q, kv, cu, block_size, 0.125, window), ref, torch.float32)


@pytest.mark.parametrize("window", [1, 7, 40])
def test_sliding_window_decode_batch_matches_decode_ref(window):
    kv, q, cu = _case([(1, s) for s in (1, 2, 15, 16, 17, 77)], 16, 3, 3, 64, table_fill=-1)
    ref = paged_attention_decode_ref(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.125, window=window)
    kv.poison_before_windows([1] * q.shape[0], window)
    assert_close(_batched(q, kv, cu, 16, 0.125, window), ref, torch.float32)


@pytest.mark.parametrize("seq_lens", [[1, 2, 15, 16, 17, 77], [130] * 5, [9]])
def test_decode_batch_matches_decode_ref(seq_lens):
    kv, q, cu = _case([(1, s) for s in seq_lens], 16, 3, 3, 64, table_fill=-1)
    out = _batched(q, kv, cu, 16, 0.125)
    ref = paged_attention_decode_ref(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.125)
    assert_close(out, ref, torch.float32)


def test_equal_prompts_match_dense_attention():
    """The benchmark's shape: every sequence a whole prompt of one length (no gather or scatter of q)."""
    lens = [(24, 24)] * 4
    kv, q, cu = _case(lens, 16, 3, 3, 64)
    out = _batched(q, kv, cu, 16, 0.2)
    for b in range(len(lens)):
        rows = slice(int(cu[b]), int(cu[b + 1]))
        dense = dense_attention(q[rows], kv.keys[b], kv.values[b], 0.2)
        torch.testing.assert_close(out[rows].double(), dense, atol=1e-5, rtol=1e-5)


def test_decode_padding_and_rows_without_sequence_are_zero():
    """A decode row with seq_len 0 (graph padding) and rows past cu_seqlens_q[B] come out zero."""
    kv, q, cu = _case([(1, 5), (1, 0), (1, 40)], 16, 2, 4, 64, table_fill=-1)
    q = torch.cat([q, torch.randn(2, *q.shape[1:])])  # 2 padding tokens past cu_seqlens_q[B]
    out = _batched(q, kv, cu, 16, 0.125)
    ref = paged_attention_decode_ref(q[:3], kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.125)
    assert_close(out[:3], ref, torch.float32)
    assert (out[1] == 0).all() and (out[3:] == 0).all()


def test_chunk_longer_than_its_keys_is_refused():
    kv, q, cu = _case([(4, 4)], 16, 1, 1, 64)
    with pytest.raises(ValueError, match="seq_len"):
        plan_paged_attention(kv.block_tables, torch.tensor([3], dtype=torch.int32), cu, 16, 4, torch.float32)


def test_plan_is_reused_across_layers():
    """One plan serves every layer's cache (the engine builds it once per step)."""
    kv, q, cu = _case([(1, 20), (6, 30)], 16, 2, 2, 64)
    plan = plan_paged_attention(kv.block_tables, kv.seq_lens, cu, 16, q.shape[0], q.dtype)
    # Another layer: other values in the same slots, the same poison elsewhere.
    for k_cache, v_cache in ((kv.k_cache, kv.v_cache), (kv.k_cache * 2 + 1, kv.v_cache.neg() - 3)):
        out = paged_attention_torch(q, k_cache, v_cache, plan, 0.1)
        ref = paged_attention_prefill_ref(q, k_cache, v_cache, kv.block_tables, cu, kv.seq_lens, 0.1)
        assert_close(out, ref, torch.float32)


@pytest.mark.parametrize("window", [None, 23])
def test_e4m3_cache_matches_prefill_ref(window):
    """An e4m3 cache with scales != 1: the batched path converts the gathered keys and applies the
    scales as the reference does."""
    kv, q, cu = _case(MIXED, 16, 2, 4, 64)
    k_scale, v_scale = to_e4m3(kv, 0.03, 2.5)
    plan = plan_paged_attention(kv.block_tables, kv.seq_lens, cu, 16, q.shape[0], q.dtype, window)
    out = paged_attention_torch(q, kv.k_cache, kv.v_cache, plan, 0.125, k_scale, v_scale)
    ref = paged_attention_prefill_ref(q, kv.k_cache, kv.v_cache, kv.block_tables, cu, kv.seq_lens, 0.125,
                                      window=window, k_scale=k_scale, v_scale=v_scale)
    assert_close(out, ref, torch.float32)
