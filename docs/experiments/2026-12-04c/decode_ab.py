"""Decode attention, the stop-19 kernel (`.scratch/baseline_decode.py`, carried) against the working
tree's once its ranges come from kernels._paged.split_key_range (not yet: see README), at
kernels.bench's decode shapes, one captured call each, with the split count chosen for the context
and for 8,192 (a decode graph is captured for max_model_len and replayed at shorter contexts). µs,
median of 3 passes.

Run: python docs/experiments/2026-12-04c/decode_ab.py
"""
import importlib
import importlib.util
import statistics
import sys

import torch

sys.path.insert(0, ".")
import kernels.bench as kb  # noqa: E402

new = importlib.import_module("kernels.paged_attention_decode")
spec = importlib.util.spec_from_file_location("baseline_decode", ".scratch/baseline_decode.py")
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)

shapes = list(kb.DECODE_SHAPES) + [(1, 2050), (4, 2050), (16, 2050), (64, 2050)]
print(f"{'batch':>5} {'ctx':>5} {'splits':>6} {'old us':>22} {'new us':>22} {'new/old':>8}  errors")
for batch, context, bound in [(b, c, bound) for b, c in shapes for bound in (c, 8192)]:
    case = kb.DecodeCase(batch, context)
    splits = new.choose_num_splits(batch, kb.NUM_KV_HEADS, bound, torch.device("cuda"))
    times, errs = {}, {}
    for name, mod in (("old", old), ("new", new)):
        kb.paged_attention_decode = mod.paged_attention_decode  # DecodeCase.run calls this name
        case.out.fill_(float("nan"))
        case.run(splits)
        errs[name] = case.error()
        times[name] = [case.time_graph(splits) * 1e3 for _ in range(3)]
    o, n = statistics.median(times["old"]), statistics.median(times["new"])
    print(f"{batch:5d} {context:5d} {splits:6d} " + " ".join(f"{t:6.1f}" for t in times["old"]) + "  "
          + " ".join(f"{t:6.1f}" for t in times["new"]) + f" {n / o:8.3f}  {errs['old']:.1e} {errs['new']:.1e}",
          flush=True)
