"""Every cuBLASLt configuration, not just the heuristic's 8: do the chat turn's skinny GEMMs have
faster kernels than any the heuristic offers?

For each 8B projection at the chat turn's 64 rows (and the lm_head at 1 row): every algorithm id
cuBLASLt lists for bf16, each with every tile, stages id, split-K count and reduction scheme its
capabilities allow (CTA swizzle, custom option and cluster shape left at 0 first), filtered by
cublasLtMatmulAlgoCheck, then timed as CUDA-graph replays over 8 weight sets (as gemm_tuner does).
A second pass varies swizzle, custom option and cluster shape around the 8 best of the first.
Prints torch's time, the heuristic's best candidate, and the 10 fastest configurations.

Run: python docs/experiments/2026-12-04c/enum.py [--budget-s 60]
"""
import argparse
import ctypes
import itertools
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, ".")
from inference import cublaslt  # noqa: E402
from inference.gemm_tuner import _graph_us, _same_product  # noqa: E402

CAP_SPLITK, CAP_REDUCTION_MASK, CAP_SWIZZLE, CAP_TILE_IDS, CAP_CUSTOM_MAX, CAP_STAGES_IDS = 0, 1, 2, 6, 7, 13
CFG_ID, CFG_TILE, CFG_SPLITK, CFG_REDUCTION, CFG_SWIZZLE, CFG_CUSTOM, CFG_STAGES, CFG_INNER, CFG_CLUSTER = range(9)
U16_ATTRS = (CFG_INNER, CFG_CLUSTER)
SPLITS = (1, 2, 3, 4, 6, 8, 12, 16)


def bind(L):
    lt = L.lt
    vp, i32, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    for name, args in (
        ("cublasLtMatmulAlgoGetIds", [vp, i32, i32, i32, i32, i32, i32, i32, vp, ctypes.POINTER(i32)]),
        ("cublasLtMatmulAlgoInit", [vp, i32, i32, i32, i32, i32, i32, i32, vp]),
        ("cublasLtMatmulAlgoCapGetAttribute", [vp, i32, vp, sz, ctypes.POINTER(sz)]),
        ("cublasLtMatmulAlgoConfigSetAttribute", [vp, i32, vp, sz]),
        ("cublasLtMatmulAlgoCheck", [vp, vp, vp, vp, vp, vp, vp, vp]),
    ):
        fn = getattr(lt, name)
        fn.argtypes, fn.restype = args, i32


def cap_array(lt, algo, attr):
    written = ctypes.c_size_t(0)
    lt.cublasLtMatmulAlgoCapGetAttribute(ctypes.byref(algo), attr, None, 0, ctypes.byref(written))
    count = written.value // 4
    if count == 0:
        return []
    buf = (ctypes.c_uint32 * count)()
    lt.cublasLtMatmulAlgoCapGetAttribute(ctypes.byref(algo), attr, buf, written.value, ctypes.byref(written))
    return list(buf)


def cap_int(lt, algo, attr):
    value, written = ctypes.c_int32(0), ctypes.c_size_t(0)
    status = lt.cublasLtMatmulAlgoCapGetAttribute(ctypes.byref(algo), attr, ctypes.byref(value), 4,
                                                  ctypes.byref(written))
    return value.value if status == 0 else 0


def make_algo(L, dt, algo_id, cfg):
    algo = cublaslt._Algo()
    if L.lt.cublasLtMatmulAlgoInit(L.handle, cublaslt._COMPUTE_32F, cublaslt._R_32F, dt, dt, dt, dt, algo_id,
                                   ctypes.byref(algo)) != 0:
        return None
    for attr, value in cfg.items():
        v = ctypes.c_uint16(value) if attr in U16_ATTRS else ctypes.c_uint32(value)
        if L.lt.cublasLtMatmulAlgoConfigSetAttribute(ctypes.byref(algo), attr, ctypes.byref(v),
                                                     ctypes.sizeof(v)) != 0:
            return None
    return algo


def check(L, plan, algo):
    result = cublaslt._HeuristicResult()
    status = L.lt.cublasLtMatmulAlgoCheck(L.handle, plan.desc, plan.a, plan.b, plan.d, plan.d, ctypes.byref(algo),
                                          ctypes.byref(result))
    return status == 0 and result.state == 0 and result.workspace_size <= cublaslt.WORKSPACE_BYTES


def first_pass_configs(L, dt):
    ids = (ctypes.c_int * 256)()
    returned = ctypes.c_int(0)
    L.lt.cublasLtMatmulAlgoGetIds(L.handle, cublaslt._COMPUTE_32F, cublaslt._R_32F, dt, dt, dt, dt, 256, ids,
                                  ctypes.byref(returned))
    out = []
    for algo_id in ids[:returned.value]:
        base = make_algo(L, dt, algo_id, {})
        if base is None:
            continue
        tiles = cap_array(L.lt, base, CAP_TILE_IDS) or [0]
        stages = cap_array(L.lt, base, CAP_STAGES_IDS) or [0]
        splitk = cap_int(L.lt, base, CAP_SPLITK)
        mask = cap_int(L.lt, base, CAP_REDUCTION_MASK)
        reductions = [r for r in (1, 2, 4) if mask & r]
        for tile, stage in itertools.product(tiles, stages):
            for s in (SPLITS if splitk else (1,)):
                for red in ([0] if s == 1 else reductions):
                    out.append((algo_id, {CFG_TILE: tile, CFG_STAGES: stage, CFG_SPLITK: s, CFG_REDUCTION: red}))
    return out, list(ids[:returned.value])


def second_pass_configs(L, algo_id, cfg):
    base = make_algo(L, cublaslt._DTYPES[torch.bfloat16], algo_id, {})
    swizzles = (0, 1) if cap_int(L.lt, base, CAP_SWIZZLE) else (0,)
    customs = range(cap_int(L.lt, base, CAP_CUSTOM_MAX) + 1)
    for sw, cu, cl in itertools.product(swizzles, customs, range(0, 20)):
        if (sw, cu, cl) != (0, 0, 0):
            yield algo_id, dict(cfg) | {CFG_SWIZZLE: sw, CFG_CUSTOM: cu, CFG_CLUSTER: cl}


def time_config(L, plan, x, weights, ref, algo):
    try:
        y = plan.run(x, weights[0], algo)
        if not (_same_product(y, ref) and torch.equal(y, plan.run(x, weights[0], algo))):
            return None
        return _graph_us(lambda i: plan.run(x, weights[i], algo), len(weights))
    except RuntimeError:
        return None


def survey(name, n, k, col, rows, budget_s):
    L = cublaslt.lib()
    dt = cublaslt._DTYPES[torch.bfloat16]
    weights = []
    for _ in range(8):
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        weights.append(w.t().contiguous().t() if col else w)
    x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
    ref = F.linear(x, weights[0])
    torch_us = _graph_us(lambda i: F.linear(x, weights[i]), len(weights))
    plan = cublaslt.Plan(cublaslt.Problem.of(x, weights[0]))
    heur = [time_config(L, plan, x, weights, ref, a) for a, _ in plan.candidates()]
    heur_best = min((h for h in heur if h is not None), default=float("nan"))
    configs, ids = first_pass_configs(L, dt)
    offered = {cublaslt.describe(a)["id"] for a, _ in plan.candidates()}
    configs.sort(key=lambda c: c[0] not in offered)  # the heuristic's own kernel families first
    t0 = time.perf_counter()
    valid, timed = 0, []
    for algo_id, cfg in configs:
        if time.perf_counter() - t0 > budget_s:
            break
        algo = make_algo(L, dt, algo_id, cfg)
        if algo is None or not check(L, plan, algo):
            continue
        valid += 1
        us = time_config(L, plan, x, weights, ref, algo)
        if us is not None:
            timed.append((us, algo_id, cfg))
    first_s = time.perf_counter() - t0
    timed.sort(key=lambda t: t[0])
    second = []
    t1 = time.perf_counter()
    for us0, algo_id, cfg in timed[:8]:
        for aid, cfg2 in second_pass_configs(L, algo_id, cfg):
            if time.perf_counter() - t1 > budget_s / 2:
                break
            algo = make_algo(L, dt, aid, cfg2)
            if algo is None or not check(L, plan, algo):
                continue
            us = time_config(L, plan, x, weights, ref, algo)
            if us is not None:
                second.append((us, aid, cfg2))
    allt = sorted(timed + second, key=lambda t: t[0])
    bytes_ = n * k * 2
    print(f"\n{name} [{n}x{k}] {'col' if col else 'row'}-major rows {rows}: torch {torch_us:.1f} us "
          f"({bytes_ / torch_us / 1e6:.2f} TB/s), heuristic best {heur_best:.1f} (of {len(heur)}); ids {ids}")
    print(f"  first pass: {len(configs)} configs, {valid} passed AlgoCheck, {len(timed)} timed in {first_s:.0f} s; "
          f"second pass {len(second)} timed")
    names = {CFG_TILE: "tile", CFG_STAGES: "stages", CFG_SPLITK: "splitk", CFG_REDUCTION: "red",
             CFG_SWIZZLE: "swz", CFG_CUSTOM: "custom", CFG_CLUSTER: "cluster"}
    for us, aid, cfg in allt[:10]:
        desc = " ".join(f"{names[a]}={v}" for a, v in cfg.items())
        print(f"  {us:7.1f} us ({bytes_ / us / 1e6:.2f} TB/s, {us / torch_us:.3f} of torch)  id={aid} {desc}")
    sys.stdout.flush()
    return torch_us, (allt[0][0] if allt else float("nan"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget-s", type=float, default=45.0, help="first-pass seconds per shape")
    args = parser.parse_args()
    torch.backends.cuda.preferred_blas_library("cublaslt")
    bind(cublaslt.lib())
    shapes = [("qkv", 6144, 4096, False, 64), ("o", 4096, 4096, True, 64), ("down", 4096, 14336, True, 64),
              ("gate_up", 28672, 4096, True, 64), ("lm_head", 128256, 4096, False, 1)]
    summary = []
    for name, n, k, col, rows in shapes:
        t, best = survey(name, n, k, col, rows, args.budget_s)
        summary.append((name, rows, t, best))
    print("\nsummary (us): shape rows torch best-of-all ratio")
    for name, rows, t, best in summary:
        print(f"  {name:8s} {rows:4d} {t:7.1f} {best:7.1f} {best / t:.3f}")


if __name__ == "__main__":
    main()
