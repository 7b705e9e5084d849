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
sys.path.insert(0, str(Path(__file__).resolve().parent))  # kernel_testing, under any import mode


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
from kernel_testing import DEVICE  # noqa: E402


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
