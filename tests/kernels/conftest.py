"""Shared setup for the kernel tests.

Without CUDA the Triton kernels run in Triton's CPU interpreter (TRITON_INTERPRET=1) on CPU tensors;
with CUDA they are compiled and run on the GPU, and the bf16/fp16 cases are added.

TRITON_INTERPRET must be set before triton is first imported: @triton.jit, triton.language's own
helpers included, picks interpreter or compiler when a function is defined. tests/conftest.py sets it
for whole-suite runs (transformers' model imports probe `import kernels`, which imports triton); this
file sets it for `pytest tests/kernels`. If triton was imported earlier anyway, the tests skip.
"""

import math
import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `import kernels`
sys.path.insert(0, str(Path(__file__).resolve().parent))  # helper modules, under any import mode

import triton.language as tl  # noqa: E402
from conftest_interpreter import patch_interpreter_for_numpy_2_4  # noqa: E402

patch_interpreter_for_numpy_2_4()
# triton's own @jit helpers (tl.cdiv, tl.max, ...) tell whether triton was imported in interpreter mode.
_INTERPRETER_UNUSABLE = not torch.cuda.is_available() and type(tl.cdiv).__name__ != "InterpretedFunction"

import pytest  # noqa: E402
from kernel_testing import DEVICE  # noqa: E402


@pytest.fixture(autouse=True)
def _require_usable_triton() -> None:
    if _INTERPRETER_UNUSABLE:
        pytest.skip(
            "triton was imported before TRITON_INTERPRET=1 was set, so kernels cannot run on CPU: "
            "run `pytest tests/kernels` on its own or export TRITON_INTERPRET=1"
        )


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
    return tuple(_REAL_EMPTY(shape, dtype=torch.float16, device=DEVICE) for _ in range(2))


@pytest.fixture
def poison_empty(monkeypatch):
    """Make torch.empty / empty_like return NaN-filled float tensors, so any output element or
    workspace entry a kernel forgets to write shows up as NaN."""
    real_empty, real_empty_like = torch.empty, torch.empty_like

    def _poison(t: torch.Tensor) -> torch.Tensor:
        return t.fill_(math.nan) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty", lambda *a, **kw: _poison(real_empty(*a, **kw)))
    monkeypatch.setattr(torch, "empty_like", lambda *a, **kw: _poison(real_empty_like(*a, **kw)))
