"""The chat turn's split attention, the stop-19 kernel (`.scratch/baseline_prefill.py`, carried) against
the working tree's (key tiles dealt evenly to the splits; block ids fetched a tile ahead of the K/V),
in the prefill graph's shape (64 rows, max_seq_len 8192) over 32 layers' caches, at several split
counts and tile widths. µs per layer (split + merge), median of 3 passes.

Run: python docs/experiments/2026-12-04c/split_ab.py
"""
import importlib
import importlib.util
import statistics
import sys

import torch

sys.path.insert(0, ".")
from kernels.bench import (PREFIX_CACHED, PREFIX_GRAPH_MAX_SEQ, PREFIX_GRAPH_ROWS, PREFIX_NEW,  # noqa: E402
                           PrefixCase, _median_ms, _relative_error)

new = importlib.import_module("kernels.paged_attention_prefill")  # the package re-exports a function of that name
spec = importlib.util.spec_from_file_location("baseline_prefill", ".scratch/baseline_prefill.py")
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)

LAYERS = 32
case = PrefixCase(PREFIX_NEW, PREFIX_CACHED, LAYERS)
rows = PREFIX_GRAPH_ROWS


def call(mod, layer, **kw):
    k, v = case.caches[layer]
    mod.paged_attention_prefill_split(case.q[:rows], k, v, case.block_tables, case.cu, case.seq_lens, case.scale,
                                      rows, out=case.out[:rows], max_seq_len=PREFIX_GRAPH_MAX_SEQ, **kw)


def check(mod, **kw):
    case.out.fill_(float("nan"))
    call(mod, 0, **kw)
    return _relative_error(case.out[:PREFIX_NEW], case.ref)


def time_us(mod, **kw):
    call(mod, 0, **kw)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for layer in range(LAYERS):
            call(mod, layer, **kw)
    return _median_ms(graph.replay) * 1e3 / LAYERS


def cfg(mod, bn):
    return mod.PrefillConfig(block_m=64, block_n=bn, num_warps=4, num_stages=1, prefetch=True)


print(f"chat turn: {PREFIX_NEW} queries after {PREFIX_CACHED} cached keys, graph rows {rows}, {LAYERS} layers")
print(f"{'kernel':>8} {'bn':>3} {'splits':>6} {'err':>9} {'us/layer (3 passes)':>26}")
results = {}
for bn in (64, 32):
    for splits in (4, 6, 8, 10, 12, 16):
        for name, mod in (("old", old), ("new", new)):
            kw = {"num_splits": splits, "config": cfg(mod, bn)}
            err = check(mod, **kw)
            times = [time_us(mod, **kw) for _ in range(3)]
            results[(name, bn, splits)] = statistics.median(times)
            print(f"{name:>8} {bn:3d} {splits:6d} {err:9.2e} " + " ".join(f"{t:7.2f}" for t in times), flush=True)
print("\nsummary: median us/layer, new/old")
for bn in (64, 32):
    for splits in (4, 6, 8, 10, 12, 16):
        o, n = results[("old", bn, splits)], results[("new", bn, splits)]
        print(f"  bn={bn:2d} splits={splits:2d}: old {o:6.2f}  new {n:6.2f}  {n / o:.3f}")
default = new.choose_prefill_splits(1, 32, 8, 128, torch.bfloat16, rows, PREFIX_GRAPH_MAX_SEQ, torch.device("cuda"))
print(f"engine default: {default} splits, bn {new.prefill_split_config(128, torch.bfloat16, 4, rows).block_n}")
