"""cuBLASLt called directly (ctypes), so that a GEMM runs with an algorithm we chose by timing it.

torch asks cuBLASLt's heuristic for one algorithm per shape and runs it. For the skinny products of
decode steps and chat turns (tens of rows against a weight of tens of MB), that first pick is not
always the fastest: the heuristic ranks by a model of the kernel, not by a clock. `Plan` holds the
descriptors of one problem (rows, the weight's shape and layout, dtype); `candidates` lists the
algorithms the heuristic offers for it; `Plan.run` computes y = x @ w.T with one of them on the
current stream (so it can be captured in a CUDA graph). Which one to use is gemm_tuner's business.

Only CUDA, bf16/fp16, no bias, x row-major and contiguous, w [out, in] row- or column-major.
"""
from __future__ import annotations

import ctypes
import glob
import os
from dataclasses import dataclass

import torch

# cublasLt.h / library_types.h values (stable across CUDA 11-13).
_COMPUTE_32F = 68
_R_32F, _R_16F, _R_16BF = 0, 2, 14
_OP_N, _OP_T = 0, 1
_DESC_TRANSA, _DESC_TRANSB = 3, 4
_PREF_MAX_WORKSPACE_BYTES = 1
_ALGO_CONFIG_ID, _ALGO_CONFIG_TILE_ID, _ALGO_CONFIG_SPLITK_NUM, _ALGO_CONFIG_REDUCTION_SCHEME = 0, 1, 2, 3
_ALGO_CONFIG_STAGES_ID = 6
_DTYPES = {torch.bfloat16: _R_16BF, torch.float16: _R_16F}
WORKSPACE_BYTES = 32 * 1024 * 1024


class _Algo(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class _HeuristicResult(ctypes.Structure):
    _fields_ = [("algo", _Algo), ("workspace_size", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves_count", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


def _find_library() -> str:
    """The libcublasLt that torch itself loaded (the same build), else one beside torch's packages."""
    torch.ones(1, 1, device="cuda", dtype=torch.bfloat16) @ torch.ones(1, 1, device="cuda", dtype=torch.bfloat16)
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "libcublasLt.so" in os.path.basename(path):
                return path
    roots = [os.path.dirname(os.path.dirname(torch.__file__))]
    for pattern in ("nvidia/cublas/lib/libcublasLt.so*", "nvidia/cu*/lib/libcublasLt.so*"):
        for root in roots:
            found = sorted(glob.glob(os.path.join(root, pattern)))
            if found:
                return found[-1]
    return "libcublasLt.so"


class _Lib:
    def __init__(self):
        self.path = _find_library()
        self.lt = lt = ctypes.CDLL(self.path)
        vp, i32, u64, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_size_t
        pvp = ctypes.POINTER(ctypes.c_void_p)
        for name, args in (
            ("cublasLtCreate", [pvp]),
            ("cublasLtMatmulDescCreate", [pvp, i32, i32]),
            ("cublasLtMatmulDescSetAttribute", [vp, i32, vp, sz]),
            ("cublasLtMatmulDescDestroy", [vp]),
            ("cublasLtMatrixLayoutCreate", [pvp, i32, u64, u64, ctypes.c_int64]),
            ("cublasLtMatrixLayoutDestroy", [vp]),
            ("cublasLtMatmulPreferenceCreate", [pvp]),
            ("cublasLtMatmulPreferenceSetAttribute", [vp, i32, vp, sz]),
            ("cublasLtMatmulPreferenceDestroy", [vp]),
            ("cublasLtMatmulAlgoGetHeuristic", [vp, vp, vp, vp, vp, vp, vp, i32, vp, ctypes.POINTER(i32)]),
            ("cublasLtMatmulAlgoConfigGetAttribute", [vp, i32, vp, sz, ctypes.POINTER(sz)]),
            ("cublasLtMatmul", [vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, sz, vp]),
        ):
            fn = getattr(lt, name)
            fn.argtypes, fn.restype = args, i32
        self.handle = ctypes.c_void_p()
        self._check(self.lt.cublasLtCreate(ctypes.byref(self.handle)), "cublasLtCreate")
        self.workspaces: dict[int, torch.Tensor] = {}

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what} failed with cuBLAS status {status}")

    def workspace(self, device: torch.device) -> torch.Tensor:
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index not in self.workspaces:
            self.workspaces[index] = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        return self.workspaces[index]


_lib: _Lib | None = None


def lib() -> _Lib:
    global _lib
    if _lib is None:
        _lib = _Lib()
    return _lib


@dataclass(frozen=True)
class Problem:
    """y [m, n] = x [m, k] @ w.T, w [n, k] with strides (k, 1) (row-major) or (1, n) (column-major)."""

    m: int
    n: int
    k: int
    weight_col_major: bool
    dtype: torch.dtype

    @classmethod
    def of(cls, x: torch.Tensor, w: torch.Tensor) -> "Problem | None":
        """The problem of F.linear(x, w), or None if this module cannot run it."""
        if not (x.is_cuda and x.dtype in _DTYPES and w.dtype == x.dtype and x.dim() == 2 and w.dim() == 2):
            return None
        n, k = w.shape
        if x.shape[1] != k or not x.is_contiguous() or x.shape[0] == 0:
            return None
        if w.stride() == (k, 1):
            col = False
        elif w.stride() == (1, n):
            col = True
        else:
            return None
        return cls(x.shape[0], n, k, col, x.dtype)


class Plan:
    """The cuBLASLt descriptors of one Problem (column-major view: D^T [n, m] = op(W) [n, k] @ X^T [k, m])."""

    def __init__(self, p: Problem):
        L = lib()
        self.problem, self._lt = p, L.lt
        dt = _DTYPES[p.dtype]
        self.desc = ctypes.c_void_p()
        L._check(L.lt.cublasLtMatmulDescCreate(ctypes.byref(self.desc), _COMPUTE_32F, _R_32F), "MatmulDescCreate")
        trans_a = ctypes.c_int32(_OP_N if p.weight_col_major else _OP_T)
        trans_b = ctypes.c_int32(_OP_N)
        L._check(L.lt.cublasLtMatmulDescSetAttribute(self.desc, _DESC_TRANSA, ctypes.byref(trans_a), 4), "TRANSA")
        L._check(L.lt.cublasLtMatmulDescSetAttribute(self.desc, _DESC_TRANSB, ctypes.byref(trans_b), 4), "TRANSB")
        self.a, self.b, self.d = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        # W as stored: row-major [n, k] is column-major k x n (ld k); column-major [n, k] is n x k (ld n).
        a_rows, a_cols, a_ld = (p.n, p.k, p.n) if p.weight_col_major else (p.k, p.n, p.k)
        create = L.lt.cublasLtMatrixLayoutCreate
        L._check(create(ctypes.byref(self.a), dt, a_rows, a_cols, a_ld), "layout A")
        L._check(create(ctypes.byref(self.b), dt, p.k, p.m, p.k), "layout B")
        L._check(create(ctypes.byref(self.d), dt, p.n, p.m, p.n), "layout D")
        self.alpha, self.beta = ctypes.c_float(1.0), ctypes.c_float(0.0)

    def candidates(self, count: int = 32) -> list[tuple[_Algo, int]]:
        """The heuristic's algorithms for this problem, best-ranked first, with their workspace sizes."""
        L = lib()
        pref = ctypes.c_void_p()
        L._check(L.lt.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "PreferenceCreate")
        try:
            ws = ctypes.c_uint64(WORKSPACE_BYTES)
            L._check(L.lt.cublasLtMatmulPreferenceSetAttribute(pref, _PREF_MAX_WORKSPACE_BYTES, ctypes.byref(ws), 8),
                     "MAX_WORKSPACE_BYTES")
            results = (_HeuristicResult * count)()
            returned = ctypes.c_int(0)
            L._check(L.lt.cublasLtMatmulAlgoGetHeuristic(L.handle, self.desc, self.a, self.b, self.d, self.d, pref,
                                                         count, results, ctypes.byref(returned)), "AlgoGetHeuristic")
        finally:
            L.lt.cublasLtMatmulPreferenceDestroy(pref)
        return [(r.algo, r.workspace_size) for r in results[:returned.value] if r.state == 0]

    def run(self, x: torch.Tensor, w: torch.Tensor, algo: _Algo, out: torch.Tensor | None = None) -> torch.Tensor:
        """y = x @ w.T with `algo`, enqueued on the current stream."""
        p = self.problem
        if out is None:
            out = torch.empty(p.m, p.n, dtype=p.dtype, device=x.device)
        L = lib()
        ws = L.workspace(x.device)
        stream = ctypes.c_void_p(torch.cuda.current_stream(x.device).cuda_stream)
        status = L.lt.cublasLtMatmul(
            L.handle, self.desc, ctypes.byref(self.alpha), ctypes.c_void_p(w.data_ptr()), self.a,
            ctypes.c_void_p(x.data_ptr()), self.b, ctypes.byref(self.beta), ctypes.c_void_p(out.data_ptr()), self.d,
            ctypes.c_void_p(out.data_ptr()), self.d, ctypes.byref(algo), ctypes.c_void_p(ws.data_ptr()),
            ctypes.c_size_t(WORKSPACE_BYTES), stream)
        L._check(status, "cublasLtMatmul")
        return out

    def __del__(self):
        lt = getattr(self, "_lt", None)
        if lt is None:
            return
        for layout in (self.a, self.b, self.d):
            if layout:
                lt.cublasLtMatrixLayoutDestroy(layout)
        if self.desc:
            lt.cublasLtMatmulDescDestroy(self.desc)


def describe(algo: _Algo) -> dict[str, int]:
    """The algorithm's id, tile, split-K count, reduction scheme and stages (for logs)."""
    L = lib()
    out = {}
    for name, attr in (("id", _ALGO_CONFIG_ID), ("tile", _ALGO_CONFIG_TILE_ID), ("splitk", _ALGO_CONFIG_SPLITK_NUM),
                       ("reduction", _ALGO_CONFIG_REDUCTION_SCHEME), ("stages", _ALGO_CONFIG_STAGES_ID)):
        value, written = ctypes.c_uint32(0), ctypes.c_size_t(0)
        status = L.lt.cublasLtMatmulAlgoConfigGetAttribute(ctypes.byref(algo), attr, ctypes.byref(value), 4,
                                                           ctypes.byref(written))
        out[name] = value.value if status == 0 else -1
    return out
