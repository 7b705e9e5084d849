"""Helpers shared by the kernel tests (imported by the test modules; named to avoid clashes)."""

import math

import torch

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# The interpreter has no bf16 tl.dot, and fp32 keeps CPU tolerances tight; on GPU test all three.
DTYPES = [torch.float32, torch.float16, torch.bfloat16] if DEVICE.type == "cuda" else [torch.float32]
TOLERANCES = {torch.float32: (2e-5, 2e-5), torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2)}


def assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    """Every element must be finite (catches unwritten NaN-poisoned outputs) and close."""
    assert torch.isfinite(actual).all(), f"{(~torch.isfinite(actual)).sum().item()} non-finite elements"
    atol, rtol = TOLERANCES[dtype]
    torch.testing.assert_close(actual.float(), expected.float(), atol=atol, rtol=rtol)


class PagedKV:
    """Random per-sequence K/V scattered into a NaN-filled paged cache through shuffled block tables.

    Unused slots, unused blocks and block-table entries past a sequence's blocks are poison (NaN /
    `table_fill`), so a kernel that reads anything it should not produces NaN.
    """

    def __init__(
        self,
        seq_lens: list[int],
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
        num_blocks: int | None = None,
        top_of_pool: bool = False,
        table_fill: int | None = None,
        caches: tuple[torch.Tensor, torch.Tensor] | None = None,
    ):
        blocks_per_seq = [math.ceil(n / block_size) for n in seq_lens]
        used = sum(blocks_per_seq)
        if caches is not None:
            self.k_cache, self.v_cache = caches
            num_blocks = self.k_cache.shape[0]
        else:
            num_blocks = num_blocks or used + 3
            shape = (num_blocks, block_size, num_kv_heads, head_dim)
            self.k_cache = torch.full(shape, math.nan, dtype=dtype, device=device)
            self.v_cache = torch.full(shape, math.nan, dtype=dtype, device=device)
        # Shuffled ids; `top_of_pool` takes them from the very end of the pool (int32-overflow test).
        first = num_blocks - used if top_of_pool else 0
        pool = first + torch.randperm(num_blocks - first)[:used]
        if caches is not None:  # a shared pool (maybe huge, lazily allocated): poison only our blocks
            self.k_cache[pool.to(device)] = math.nan
            self.v_cache[pool.to(device)] = math.nan
        if top_of_pool:
            poison_block = first - 1
        else:
            unused = torch.ones(num_blocks, dtype=torch.bool)
            unused[pool] = False
            poison_block = int(unused.nonzero()[0])
        width = max(blocks_per_seq + [1]) + 2
        fill = poison_block if table_fill is None else table_fill
        self.block_tables = torch.full((len(seq_lens), width), fill, dtype=torch.int32)
        self.keys, self.values = [], []  # dense [L, Hkv, D] per sequence
        cursor = 0
        for b, (n, nb) in enumerate(zip(seq_lens, blocks_per_seq)):
            ids = pool[cursor : cursor + nb]
            cursor += nb
            self.block_tables[b, :nb] = ids.int()
            k = torch.randn(n, num_kv_heads, head_dim, dtype=dtype, device=device)
            v = torch.randn(n, num_kv_heads, head_dim, dtype=dtype, device=device)
            slots = (ids.repeat_interleave(block_size) * block_size + torch.arange(block_size).repeat(nb))[:n]
            self.k_cache.view(-1, num_kv_heads, head_dim)[slots.to(device)] = k
            self.v_cache.view(-1, num_kv_heads, head_dim)[slots.to(device)] = v
            self.keys.append(k)
            self.values.append(v)
        self.block_tables = self.block_tables.to(device)
        self.seq_lens = torch.tensor(seq_lens, dtype=torch.int32, device=device)
        self.block_size = block_size

    def poison_keys(self, seq: int, end: int) -> None:
        """Overwrite sequence seq's keys and values 0 .. end - 1 with NaN in the cache: a kernel that
        loads any of them (even to mask it away: 0 * NaN is NaN) produces NaN."""
        if end <= 0:
            return
        pos = torch.arange(end, device=self.block_tables.device)
        slots = self.block_tables[seq, pos // self.block_size].long() * self.block_size + pos % self.block_size
        num_kv_heads, head_dim = self.k_cache.shape[2], self.k_cache.shape[3]
        self.k_cache.view(-1, num_kv_heads, head_dim)[slots] = math.nan
        self.v_cache.view(-1, num_kv_heads, head_dim)[slots] = math.nan

    def poison_before_windows(self, q_lens: list[int], window: int) -> None:
        """Poison every key no query sees: those before the first query's window, in each sequence."""
        for b, (q_len, seq_len) in enumerate(zip(q_lens, self.seq_lens.tolist())):
            self.poison_keys(b, seq_len - q_len - window + 1)


def dense_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                    window: int | None = None) -> torch.Tensor:
    """Independent float64 attention of q [T, Hq, D] at the last T positions of k, v [L, Hkv, D]; with a
    window, the query at p sees keys p - window + 1 .. p (Hugging Face's sliding_window)."""
    num_q, num_q_heads, _ = q.shape
    seq_len, num_kv_heads, _ = k.shape
    g = num_q_heads // num_kv_heads
    out = torch.empty(q.shape, dtype=torch.float64)
    for h in range(num_q_heads):
        kh, vh = k[:, h // g].double().cpu(), v[:, h // g].double().cpu()
        scores = (q[:, h].double().cpu() @ kh.T) * scale  # [T, L]
        query_pos = torch.arange(seq_len - num_q, seq_len)[:, None]
        scores = scores.masked_fill(torch.arange(seq_len)[None, :] > query_pos, -math.inf)
        if window is not None:
            scores = scores.masked_fill(torch.arange(seq_len)[None, :] <= query_pos - window, -math.inf)
        out[:, h] = torch.softmax(scores, dim=-1) @ vh
    return out



def capture_without_host_sync(step) -> "torch.cuda.CUDAGraph":
    """Run `step` once to compile, once more and under CUDA-graph capture with host syncs set to raise
    (a launcher that reads a device value would fail here); returns the graph to replay."""
    step()  # compile outside the capture
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        step()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return graph


def to_e4m3(kv: PagedKV, k_scale: float, v_scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Replace kv's caches by e4m3 ones holding K / k_scale and V / v_scale (NaN poison stays NaN);
    returns the scales as the kernels take them (fp32, one element, on the cache's device)."""
    from kernels.kv_cache_write import quantize_kv_ref

    device = kv.k_cache.device
    scales = torch.tensor([k_scale], device=device), torch.tensor([v_scale], device=device)
    kv.k_cache = quantize_kv_ref(kv.k_cache, scales[0])
    kv.v_cache = quantize_kv_ref(kv.v_cache, scales[1])
    return scales
