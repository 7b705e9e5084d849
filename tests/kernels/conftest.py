"""Shared setup for the kernel tests.

Without CUDA the Triton kernels run in Triton's CPU interpreter (TRITON_INTERPRET=1) on CPU tensors;
with CUDA they are compiled and run on the GPU, and the bf16/fp16 cases are added.
"""

import importlib
import math
import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `import kernels`


def _reload_kernels_if_compiled_early() -> None:
    """@triton.jit picks interpreter vs compiler when a kernel is defined. If another test package
    imported `kernels` before this conftest set TRITON_INTERPRET, redefine the kernels."""
    if torch.cuda.is_available() or "kernels" not in sys.modules:
        return
    names = sorted((n for n in sys.modules if n == "kernels" or n.startswith("kernels.")), key=len, reverse=True)
    for name in names:  # submodules first, then the package re-exports the new functions
        importlib.reload(sys.modules[name])


_reload_kernels_if_compiled_early()


def _patch_interpreter_for_numpy_2_4() -> None:
    """Triton 3.6's interpreter turns scalar tensors into ints with int(ndarray of shape (1,)), which
    NumPy >= 2.4 rejects (triton-lang/triton#9171); this breaks `range(lo, hi)` with tensor bounds."""
    if torch.cuda.is_available():
        return
    from triton.runtime import interpreter

    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "_pagoda_patched", False):
        return

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patched._pagoda_patched = True
    interpreter._patch_lang_tensor = patched


_patch_interpreter_for_numpy_2_4()

import pytest  # noqa: E402

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# The interpreter has no bf16 tl.dot, and fp32 keeps CPU tolerances tight; on GPU test all three.
DTYPES = [torch.float32, torch.float16, torch.bfloat16] if DEVICE.type == "cuda" else [torch.float32]
TOLERANCES = {torch.float32: (2e-5, 2e-5), torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2)}


@pytest.fixture
def device() -> torch.device:
    return DEVICE


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


_REAL_EMPTY = torch.empty


@pytest.fixture(scope="session")
def huge_pool() -> tuple[torch.Tensor, torch.Tensor]:
    """fp16 k/v caches [2**21 + 64, 16, 1, 64]: the top blocks sit past 2**31 elements, so any int32
    offset arithmetic overflows there. The 4.3 GB per cache are never written as a whole; on CPU only
    the pages a test touches get allocated."""
    shape = (2**31 // (16 * 64) + 64, 16, 1, 64)
    return _REAL_EMPTY(shape, dtype=torch.float16, device=DEVICE), _REAL_EMPTY(shape, dtype=torch.float16, device=DEVICE)


@pytest.fixture
def poison_empty(monkeypatch):
    """Make torch.empty / empty_like return NaN-filled float tensors, so any output element or
    workspace entry a kernel forgets to write shows up as NaN."""
    real_empty, real_empty_like = torch.empty, torch.empty_like

    def _poison(t: torch.Tensor) -> torch.Tensor:
        return t.fill_(math.nan) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty", lambda *a, **kw: _poison(real_empty(*a, **kw)))
    monkeypatch.setattr(torch, "empty_like", lambda *a, **kw: _poison(real_empty_like(*a, **kw)))


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


def dense_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Independent float64 attention of q [T, Hq, D] at the last T positions of k, v [L, Hkv, D]."""
    num_q, num_q_heads, _ = q.shape
    seq_len, num_kv_heads, _ = k.shape
    g = num_q_heads // num_kv_heads
    out = torch.empty(q.shape, dtype=torch.float64)
    for h in range(num_q_heads):
        kh, vh = k[:, h // g].double().cpu(), v[:, h // g].double().cpu()
        scores = (q[:, h].double().cpu() @ kh.T) * scale  # [T, L]
        query_pos = torch.arange(seq_len - num_q, seq_len)[:, None]
        scores = scores.masked_fill(torch.arange(seq_len)[None, :] > query_pos, -math.inf)
        out[:, h] = torch.softmax(scores, dim=-1) @ vh
    return out


@pytest.fixture
def paged_kv():
    return PagedKV


@pytest.fixture
def dense_attn():
    return dense_attention


@pytest.fixture
def close():
    return assert_close
