"""Split-KV prefill (few queries over long contexts) against the torch reference."""

import math

import pytest
import torch
from kernel_testing import DEVICE, DTYPES, PagedKV, assert_close, capture_without_host_sync, to_e4m3

from kernels.paged_attention_prefill import PrefillConfig, paged_attention_prefill, paged_attention_prefill_ref
from kernels.paged_attention_prefill_split import SPLIT_MAX_Q_LEN, choose_prefill_splits, paged_attention_prefill_split

# (q_len, seq_len): a chat turn after a long cached prefix, decode rows, a pure-new chunk (q_len ==
# seq_len), short prefix hits, a chunk at the routing limit and one past it. Odd lengths throughout.
CHAT = [(50, 601), (1, 77), (13, 13), (7, 263), (1, 1)]
QUERY_COUNTS = [1, 2, 17, 64, 129, 130]


def _split_case(lens, block_size, num_kv_heads, gqa, head_dim, dtype, pad_tokens=0, **kv_kwargs):
    q_lens = [q for q, _ in lens]
    kv = PagedKV([s for _, s in lens], block_size, num_kv_heads, head_dim, dtype, DEVICE, **kv_kwargs)
    cu = torch.tensor([0] + torch.tensor(q_lens).cumsum(0).tolist(), dtype=torch.int32, device=DEVICE)
    # q as a view with a token stride larger than Hq * D, as when sliced out of a fused projection;
    # `pad_tokens` rows past cu_seqlens_q[B] (as in a CUDA graph's padded input) must stay unwritten.
    num_q_heads = num_kv_heads * gqa
    q = torch.randn(sum(q_lens) + pad_tokens, num_q_heads + 3, head_dim, dtype=dtype, device=DEVICE)[:, 3:]
    return kv, q, cu, max(q_lens)


def _check(kv, q, cu, max_q_len, scale, dtype, num_splits=None, window=None, **kwargs):
    out = torch.full(q.shape, math.nan, dtype=q.dtype, device=q.device)
    args = (q, kv.k_cache, kv.v_cache, kv.block_tables, cu, kv.seq_lens, scale, max_q_len)
    ref = paged_attention_prefill_ref(*args, window=window)
    if window is not None:  # the kernel must not even load a key that left every query's window
        kv.poison_before_windows((cu[1:] - cu[:-1]).tolist(), window)
    result = paged_attention_prefill_split(*args, num_splits, out=out, window=window, **kwargs)
    assert result is out
    num_real = int(cu[-1])
    assert_close(out[:num_real], ref[:num_real], dtype)
    assert out[num_real:].isnan().all(), "rows past cu_seqlens_q[B] were written"
    return out


@pytest.mark.parametrize(
    "block_size, num_kv_heads, gqa, head_dim",
    [(16, 2, 1, 64), (16, 2, 4, 64), (32, 1, 8, 64), (16, 1, 4, 128), (32, 2, 3, 32), (8, 1, 4, 64)],
)
@pytest.mark.parametrize("num_splits", [1, 3, None])
def test_split_chat_batch_matches_ref(block_size, num_kv_heads, gqa, head_dim, num_splits, poison_empty):
    kv, q, cu, max_q_len = _split_case(CHAT, block_size, num_kv_heads, gqa, head_dim, torch.float32, pad_tokens=3)
    _check(kv, q, cu, max_q_len, head_dim**-0.5, torch.float32, num_splits)


@pytest.mark.parametrize("window", [1, 5, 23, 70, 1000])
@pytest.mark.parametrize("block_size, num_kv_heads, gqa", [(16, 2, 4), (8, 1, 3)])
@pytest.mark.parametrize("num_splits", [1, 3])
def test_split_sliding_window_matches_ref(block_size, num_kv_heads, gqa, num_splits, window, poison_empty):
    """Windows of 1 key, less than a block, one block, not a multiple of a block or tile, about the
    chat turn's length, and longer than every context."""
    kv, q, cu, max_q_len = _split_case(CHAT, block_size, num_kv_heads, gqa, 64, torch.float32, pad_tokens=3)
    _check(kv, q, cu, max_q_len, 0.125, torch.float32, num_splits, window=window)


@pytest.mark.parametrize(
    "config",
    [PrefillConfig(16, 16, 4, 1), PrefillConfig(64, 16, 4, 1), PrefillConfig(32, 32, 4, 1)],
    ids=lambda c: f"bm{c.block_m}-bn{c.block_n}",
)
@pytest.mark.parametrize("window", [3, 100])
@pytest.mark.parametrize("num_splits", [1, 16])
def test_split_sliding_window_tiles_and_splits(config, window, num_splits, poison_empty):
    """Tiles of more tokens than keys per step, windows shorter and longer than a tile's rows, and more
    splits than the window has tiles (empty ranges, rows that see none of a range's keys)."""
    kv, q, cu, max_q_len = _split_case([(64, 400), (45, 45), (7, 130)], 16, 1, 1, 64, torch.float32)
    _check(kv, q, cu, max_q_len, 0.125, torch.float32, num_splits, window=window, config=config)


@pytest.mark.parametrize("q_len", QUERY_COUNTS)
def test_split_query_counts(q_len, poison_empty):
    """One sequence, q_len new tokens after an odd-length cached prefix (a prefix hit), and the same
    tokens as a pure-new prompt in the same batch."""
    lens = [(q_len, 333 + q_len), (q_len, q_len)]
    kv, q, cu, max_q_len = _split_case(lens, 16, 1, 4, 64, torch.float32)
    _check(kv, q, cu, max_q_len, 0.125, torch.float32, 4)


@pytest.mark.parametrize("num_splits", [2, 7, 16, 64])
def test_split_counts_with_empty_splits(num_splits, poison_empty):
    """More splits than key tiles: most programs see an empty range and write only -inf maxima; in the
    last split, causal rows that see none of its keys must not turn into NaN."""
    kv, q, cu, max_q_len = _split_case([(37, 290), (5, 5), (1, 40)], 32, 2, 4, 64, torch.float32)
    _check(kv, q, cu, max_q_len, 0.2, torch.float32, num_splits)


def test_split_graph_bounds(poison_empty):
    """As captured by PrefillGraphs: q padded to the graph size (max_q_len = 64 > q_len), splits chosen
    for the model's max length (max_seq_len = 8192) while the actual contexts are short."""
    kv, q, cu, _ = _split_case([(50, 611)], 16, 2, 4, 64, torch.float32, pad_tokens=14)
    assert q.shape[0] == 64
    splits = choose_prefill_splits(1, 8, 2, 64, torch.float32, 64, 8192, DEVICE)
    _check(kv, q, cu, 64, 0.125, torch.float32, max(splits, 8), max_seq_len=8192)
    _check(kv, q, cu, 64, 0.125, torch.float32, None, max_seq_len=8192)


@pytest.mark.parametrize(
    "config",
    [PrefillConfig(16, 16, 4, 1), PrefillConfig(32, 32, 4, 2), PrefillConfig(128, 64, 8, 3),
     PrefillConfig(64, 16, 4, 1)],
    ids=lambda c: f"bm{c.block_m}-bn{c.block_n}",
)
def test_split_tile_sizes(config, poison_empty):
    kv, q, cu, max_q_len = _split_case([(45, 260), (3, 3), (20, 97)], 16, 2, 4, 64, torch.float32)
    _check(kv, q, cu, max_q_len, 0.125, torch.float32, 5, config=config)


@pytest.mark.parametrize("dtype", DTYPES + ([torch.float16] if DEVICE.type == "cpu" else []))
def test_split_dtypes(dtype, poison_empty):
    kv, q, cu, max_q_len = _split_case([(50, 450), (1, 129), (33, 33)], 16, 2, 4, 128, dtype)
    out = _check(kv, q, cu, max_q_len, 0.1, dtype, 6)
    assert out.dtype == dtype


def test_split_empty_sequences(poison_empty):
    """Sequences with no new tokens (and garbage block tables) are skipped."""
    kv, q, cu, max_q_len = _split_case([(0, 0), (9, 200), (0, 16), (3, 3)], 16, 2, 4, 64, torch.float32,
                                       pad_tokens=4, table_fill=-1)
    _check(kv, q, cu, max_q_len, 0.125, torch.float32, 3)


def test_split_top_of_huge_pool(huge_pool, poison_empty):
    """Block ids near the top of a 2**21-block pool whose element offsets pass 2**31 (int64 offsets)."""
    lens = [(20, 300), (3, 50)]
    kv, q, cu, max_q_len = _split_case(lens, 16, 1, 4, 64, torch.float16, caches=huge_pool, top_of_pool=True)
    assert kv.k_cache.shape[0] >= 32768
    assert int(kv.block_tables[:, 0].long().min()) * kv.k_cache.stride(0) > 2**31
    for num_splits in (1, 4):
        _check(kv, q, cu, max_q_len, 0.125, torch.float16, num_splits)


def test_split_agrees_with_unsplit_kernel(poison_empty):
    kv, q, cu, max_q_len = _split_case(CHAT, 16, 2, 4, 64, torch.float32)
    args = (q, kv.k_cache, kv.v_cache, kv.block_tables, cu, kv.seq_lens, 0.125, max_q_len)
    assert_close(paged_attention_prefill_split(*args, 5), paged_attention_prefill(*args), torch.float32)


def test_choose_prefill_splits():
    """The 8B chat turn (50 queries after 2,000 cached tokens) splits; long chunks, big batches and
    short contexts do not."""
    if DEVICE.type == "cuda":
        dev = DEVICE
        assert choose_prefill_splits(1, 32, 8, 128, torch.bfloat16, 50, 2050, dev) >= 4
        assert choose_prefill_splits(1, 32, 8, 128, torch.bfloat16, 64, 8192, dev) >= 4  # graph bound
        assert choose_prefill_splits(64, 32, 8, 128, torch.bfloat16, 50, 2050, dev) == 1
    else:
        dev = torch.device("cpu")  # a stand-in of 4 SMs
        assert choose_prefill_splits(1, 4, 1, 64, torch.float32, 3, 2050, dev) > 1
        assert choose_prefill_splits(16, 4, 1, 64, torch.float32, 3, 2050, dev) == 1
    assert choose_prefill_splits(1, 32, 8, 128, torch.bfloat16, SPLIT_MAX_Q_LEN + 1, 8192, dev) == 1
    assert choose_prefill_splits(1, 32, 8, 128, torch.bfloat16, 4, 100, dev) == 1  # too short to split
    assert choose_prefill_splits(0, 32, 8, 128, torch.bfloat16, 4, 100, dev) == 1
    # A sliding layer splits the keys its queries see, not the context: 100 + 3 - 1 keys are too few.
    assert choose_prefill_splits(1, 4, 1, 64, torch.float32, 3, 2050, dev, window=100) == 1


def test_split_rejects_bad_inputs():
    kv, q, cu, max_q_len = _split_case([(3, 50), (2, 2)], 16, 2, 4, 64, torch.float32)
    args = [q, kv.k_cache, kv.v_cache, kv.block_tables, cu, kv.seq_lens, 0.1, max_q_len]
    with pytest.raises(ValueError, match="num_splits"):
        paged_attention_prefill_split(*args, 0)
    with pytest.raises(ValueError, match="num_splits"):
        paged_attention_prefill_split(*args, 65)
    with pytest.raises(ValueError, match="max_q_len"):
        paged_attention_prefill_split(*args[:7], 0)
    with pytest.raises(ValueError, match="cu_seqlens_q"):
        paged_attention_prefill_split(*args[:4], cu[:-1], *args[5:])
    with pytest.raises(TypeError, match="q has dtype"):
        paged_attention_prefill_split(q.double(), *args[1:])
    with pytest.raises(ValueError, match="GQA group"):
        paged_attention_prefill_split(*args, config=PrefillConfig(2, 16, 4, 1))
    with pytest.raises(ValueError, match="window"):
        paged_attention_prefill_split(*args, window=-1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_split_cuda_graph_without_host_sync():
    """Captured once for PrefillGraphs-like bounds (64 query rows, max_seq_len 4096), replayed with other
    context lengths and query counts: the split ranges follow the device-side seq_lens."""
    dtype = torch.bfloat16
    kv, q, cu, _ = _split_case([(50, 2050)], 16, 8, 4, 128, dtype, pad_tokens=14)
    out = torch.empty_like(q)
    seq_lens, cu_q = kv.seq_lens.clone(), cu.clone()

    def step():
        paged_attention_prefill_split(q, kv.k_cache, kv.v_cache, kv.block_tables, cu_q, seq_lens, 0.1, 64,
                                      max_seq_len=4096, out=out)

    graph = capture_without_host_sync(step)
    for q_len, seq_len in ((50, 2050), (64, 64), (17, 1000), (2, 2049)):
        seq_lens.fill_(seq_len)
        cu_q[1] = q_len
        out.fill_(math.nan)
        graph.replay()
        ref = paged_attention_prefill_ref(q, kv.k_cache, kv.v_cache, kv.block_tables, cu_q, seq_lens, 0.1)
        assert_close(out[:q_len], ref[:q_len], dtype)
        assert out[q_len:].isnan().all()


@pytest.mark.parametrize("num_splits,num_q_heads", [(8, 32), (5, 9), (1, 4)])
def test_merge_ignores_nan_in_splits_that_saw_no_key(num_splits, num_q_heads):
    """The merge loads every split's sum and acc before it knows which splits are live; a split that saw
    no key (max -inf) may have left NaN there, and it must not reach the output. Heads that are not a
    multiple of the merge's heads per program (9) are covered too; rows past cu_seqlens_q stay unwritten."""
    from kernels.paged_attention_prefill_split import _prefill_merge_kernel, MERGE_HEADS

    import triton

    g = torch.Generator().manual_seed(num_splits)
    tokens, d = 6, 128
    part_acc = torch.randn(tokens, num_q_heads, num_splits, d, generator=g)
    part_max = torch.randn(tokens, num_q_heads, num_splits, generator=g) * 4
    part_sum = torch.rand(tokens, num_q_heads, num_splits, generator=g) + 0.5
    dead = torch.rand(tokens, num_q_heads, num_splits, generator=g) < 0.4
    dead[0, 0] = True  # one (token, head) with every split empty: its output is 0
    part_max[dead] = -math.inf
    part_sum[dead] = math.nan
    part_acc[dead] = math.nan
    w = torch.exp2(part_max - part_max.amax(-1, keepdim=True).clamp(min=-1e30)).where(~dead, 0.0)
    denom = (w * part_sum.nan_to_num()).sum(-1)
    expected = (part_acc.nan_to_num() * w[..., None]).sum(-2) / denom.where(denom > 0, 1.0)[..., None]
    out = torch.full((tokens, num_q_heads, d), math.nan)
    cu = torch.tensor([0, tokens - 1], dtype=torch.int32)  # the last row is padding
    heads = min(MERGE_HEADS, triton.next_power_of_2(num_q_heads))
    args = [t.to(DEVICE) for t in (part_acc, part_max, part_sum, cu, out)]
    _prefill_merge_kernel[(tokens, triton.cdiv(num_q_heads, heads))](
        *args, 1, num_q_heads, num_splits, out.stride(0), out.stride(1),
        HEAD_DIM=d, BLOCK_S=triton.next_power_of_2(num_splits), HEADS=heads,
    )
    got = args[-1].cpu()
    assert_close(got[:tokens - 1], expected[:tokens - 1], torch.float32)
    assert (got[0, 0] == 0).all()
    assert got[tokens - 1].isnan().all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_splits", [1, 4])
@pytest.mark.parametrize("window", [None, 23])
def test_split_prefill_reads_e4m3_cache(dtype, num_splits, window, poison_empty):
    """An e4m3 cache with scales != 1: the split kernel equals the reference over the same cache."""
    kv, q, cu, max_q_len = _split_case(CHAT, 16, 2, 4, 64, dtype, pad_tokens=2)
    k_scale, v_scale = to_e4m3(kv, 0.03, 2.5)
    out = torch.full(q.shape, math.nan, dtype=q.dtype, device=q.device)
    args = (q, kv.k_cache, kv.v_cache, kv.block_tables, cu, kv.seq_lens, 0.125, max_q_len)
    ref = paged_attention_prefill_ref(*args, window=window, k_scale=k_scale, v_scale=v_scale)
    if window is not None:
        kv.poison_before_windows((cu[1:] - cu[:-1]).tolist(), window)
    paged_attention_prefill_split(*args, num_splits, out=out, window=window, k_scale=k_scale, v_scale=v_scale)
    num_real = int(cu[-1])
    assert_close(out[:num_real], ref[:num_real], dtype)
    assert out[num_real:].isnan().all()
