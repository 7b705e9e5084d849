"""Choose each projection's GEMM algorithm by timing it, at the row counts CUDA graphs capture.

torch runs the algorithm that cuBLASLt's heuristic ranks first. At the skinny row counts of decode
steps and chat turns that pick is sometimes far from the fastest the heuristic also offers (H200,
8B shape: gate_up at 128 rows 102.8 µs with torch's pick, 61.0 µs with another candidate; lm_head
at 64 rows 285.9 -> 258.9 µs; docs/BENCHMARKS.md, "Projection GEMMs"). So before the graphs are
captured, for every group of projections that share a weight shape and layout (e.g. the 32 layers'
gate_up) and every captured row count, torch's F.linear and each candidate are timed as CUDA-graph
replays over several layers' weights (so no weight is read from L2), and a candidate replaces
torch's pick only if it is faster by a margin and gives the same product. The choice is stored on
the modules (`Linear.tuned`), which run it whenever they see that row count.
"""
from __future__ import annotations

import logging
import statistics
from collections import defaultdict
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import cublaslt
from .models.llama import Linear

log = logging.getLogger("inference")

MARGIN = 0.97  # a candidate must take at most 97% of torch's time: timing noise must not flip choices
MAX_WEIGHTS = 8  # distinct layers' weights per timing (together far more than the L2)


@dataclass
class Choice:
    group: str  # e.g. "6144x4096 row-major x32"
    rows: int
    torch_us: float
    best_us: float  # == torch_us when torch's pick stays
    algo: dict | None  # the chosen candidate's config (cublaslt.describe), None: torch's pick


def replay_us(graph: torch.cuda.CUDAGraph, replays: int = 3) -> float:
    """Median µs of one replay of a captured graph (after one replay to warm up)."""
    graph.replay()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def _graph_us(fn, calls: int) -> float:
    """Median µs per call of fn(0..calls-1) captured in one CUDA graph."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(calls):  # warm-up outside the capture
            fn(i)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for i in range(calls):
                fn(i)
    torch.cuda.current_stream().wait_stream(stream)
    return replay_us(graph) / calls


def _same_product(y: torch.Tensor, ref: torch.Tensor) -> bool:
    """Equal up to summation order (split-K sums in another order: ~1e-4 relative in bf16)."""
    err = (y.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-30)
    return bool(torch.isfinite(y).all()) and err.item() < 1e-2


@torch.inference_mode()
def tune_group(modules: list[Linear], rows: int) -> Choice:
    """Time torch's pick and every candidate for `modules` (same weight shape and layout) at `rows`;
    install the winner on all of them. Returns what was measured."""
    weights = [m.weight for m in modules[:MAX_WEIGHTS]]
    w0 = weights[0]
    n, k = w0.shape
    col = w0.stride() == (1, n)
    group = f"{n}x{k} {'column' if col else 'row'}-major x{len(modules)}"
    x = torch.randn(rows, k, device=w0.device, dtype=w0.dtype)
    ref = F.linear(x, w0)
    torch_us = _graph_us(lambda i: F.linear(x, weights[i]), len(weights))
    problem = cublaslt.Problem.of(x, w0)
    best_us, best = torch_us, None
    if problem is not None:
        plan = cublaslt.Plan(problem)
        for algo, _ in plan.candidates():
            try:
                y = plan.run(x, w0, algo)
                if not (_same_product(y, ref) and torch.equal(y, plan.run(x, w0, algo))):
                    continue  # a wrong or run-to-run different product is never chosen
                us = _graph_us(lambda i, a=algo: plan.run(x, weights[i], a), len(weights))
            except RuntimeError:  # the candidate refuses this problem at run time
                continue
            if us < best_us and us <= MARGIN * torch_us:
                best_us, best = us, algo
    for m in modules:
        if best is None:
            m.tuned.pop(rows, None)
        else:
            m.tuned[rows] = (plan, best)
    return Choice(group, rows, torch_us, best_us, cublaslt.describe(best) if best is not None else None)


def projection_groups(model: torch.nn.Module) -> list[list[Linear]]:
    """The model's bias-free CUDA bf16/fp16 Linears, grouped by weight shape and layout."""
    groups: dict[tuple, list[Linear]] = defaultdict(list)
    for m in model.modules():
        if isinstance(m, Linear) and m.bias is None and m.weight.is_cuda and m.weight.dtype in (
                torch.bfloat16, torch.float16):
            groups[(tuple(m.weight.shape), m.weight.stride(), m.weight.dtype)].append(m)
    return list(groups.values())


def tune_model(model: torch.nn.Module, row_counts: list[int]) -> list[Choice]:
    """Tune every projection group at every row count; returns the measurements (for logs, benches)."""
    choices = [tune_group(group, rows) for group in projection_groups(model) for rows in sorted(set(row_counts))]
    changed = [c for c in choices if c.algo is not None]
    saved = sum(c.torch_us - c.best_us for c in changed)
    log.info("GEMM tuning: %d of %d (shape, rows) pairs run another cuBLASLt algorithm than torch's (%.0f µs "
             "saved summed over them, per layer)", len(changed), len(choices), saved)
    return choices


def format_choices(choices: list[Choice]) -> str:
    """One line per (shape, rows): torch's time, the chosen one's, and the candidate (for bench logs)."""
    lines = []
    for c in choices:
        picked = "torch's pick stays" if c.algo is None else f"candidate {c.algo}"
        lines.append(f"  {c.group:32s} rows {c.rows:4d}: {c.torch_us:7.1f} -> {c.best_us:7.1f} us  {picked}")
    return "\n".join(lines)
