"""Microbenchmark of the attention kernels on a CUDA GPU: `python -m benchmarks.kernels [--no-sweep]`.

1. Device copy bandwidth (bytes read + written by a 1 GiB device-to-device copy).
2. paged_attention_decode at the Llama-3-8B shape (Hq=32, Hkv=8, D=128, bf16, block_size 16),
   B=1/64/256 with 4096-token contexts and B=1 at 512: checked against the ref, then timed as a CUDA
   graph replay (how the engine runs decode); bandwidth = K+V bytes read / time.
3. Unless --no-sweep: other launch configs and split counts, to re-tune the heuristics.
4. paged_attention_prefill on a 4096-token prompt and a 512-token chunk after a 3584-token prefix.
5. Prefix reuse (a pinned-prefix chat turn): 1 sequence, 50 new queries after 2,000 cached tokens,
   unsplit prefill kernel vs the split-KV path, eagerly shaped (max_q_len 50) and as PrefillGraphs
   captures it (64 query rows, max_seq_len 8192); timed as graph replays of 1 call and of 32 calls
   over 32 layers' caches (per-layer time, launch gaps amortised as in the engine's graph). Unless
   --no-sweep: split-path configs x split counts.

`--only decode prefill prefix` picks sections (the copy bandwidth always runs).

Timings are triton.testing.do_bench medians (L2 flushed between runs); the run prints its own duration.
"""

import argparse
import math
import sys
import time

import torch
import triton
import triton.testing

from kernels import (DecodeConfig, PrefillConfig, choose_num_splits, choose_prefill_splits, paged_attention_decode,
                     paged_attention_decode_ref, paged_attention_prefill, paged_attention_prefill_ref,
                     paged_attention_prefill_split)
from kernels.paged_attention_decode import decode_config
from kernels.paged_attention_prefill import prefill_config
from kernels.paged_attention_prefill_split import prefill_split_config

NUM_Q_HEADS, NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE = 32, 8, 128, 16  # Llama-3-8B
DTYPE = torch.bfloat16
DEVICE = "cuda"
DECODE_SHAPES = [(1, 4096), (64, 4096), (256, 4096), (1, 512)]  # (batch, context)
SWEEP_SHAPES = [(1, 4096), (64, 4096), (256, 4096)]
SPLIT_SWEEPS = {(1, 4096): [8, 16, 32, 64], (64, 4096): [1, 2, 3, 4, 8], (256, 4096): [1, 2, 4]}
PREFILL_SHAPES = [(4096, 4096), (512, 4096)]  # (q_len, seq_len)
SWEEP_CONFIGS = [  # (block_n, num_warps, num_stages); the first is the default for this shape
    DecodeConfig(64, 4, 5),
    DecodeConfig(64, 4, 3),
    DecodeConfig(64, 4, 1),
    DecodeConfig(32, 4, 5),
    DecodeConfig(128, 4, 3),
]
PREFIX_NEW, PREFIX_CACHED = 50, 2000  # the pinned-prefix chat turn of docs/BENCHMARKS.md
PREFIX_LAYERS = 32  # Llama-3-8B: 32 layers, one cache each
PREFIX_GRAPH_ROWS, PREFIX_GRAPH_MAX_SEQ = 64, 8192  # PrefillGraphs: size 64 for 50 tokens, max_model_len
PREFIX_SWEEP_CONFIGS = [  # (block_m, block_n, num_warps, num_stages); the first is the default here
    PrefillConfig(64, 64, 4, 1),
    PrefillConfig(64, 32, 4, 1),
    PrefillConfig(64, 64, 8, 1),
    PrefillConfig(128, 64, 8, 1),
    PrefillConfig(128, 32, 8, 1),
    PrefillConfig(32, 64, 4, 1),
    PrefillConfig(32, 32, 4, 1),
]
PREFIX_SWEEP_SPLITS = [4, 6, 8, 12, 16, 24, 32]
TOLERANCE = 1e-2  # on ||out - ref|| / ||ref||; bf16 rounding gives ~3e-3


def _median_ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")


def copy_bandwidth() -> float:
    """Bytes per second of a large device copy, counting bytes read plus bytes written."""
    src = torch.randn(1 << 29, dtype=DTYPE, device=DEVICE)  # 1 GiB
    dst = torch.empty_like(src)
    ms = _median_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * src.element_size() / (ms * 1e-3)


class DecodeCase:
    """Random paged K/V for `batch` sequences of `context` keys, shuffled over the block pool."""

    def __init__(self, batch: int, context: int):
        blocks_per_seq = triton.cdiv(context, BLOCK_SIZE)
        num_blocks = batch * blocks_per_seq + 1
        shape = (num_blocks, BLOCK_SIZE, NUM_KV_HEADS, HEAD_DIM)
        self.k_cache = torch.randn(shape, dtype=DTYPE, device=DEVICE)
        self.v_cache = torch.randn(shape, dtype=DTYPE, device=DEVICE)
        perm = torch.randperm(num_blocks, device=DEVICE)[: batch * blocks_per_seq]
        self.block_tables = perm.view(batch, blocks_per_seq).int()
        self.seq_lens = torch.full((batch,), context, dtype=torch.int32, device=DEVICE)
        self.q = torch.randn(batch, NUM_Q_HEADS, HEAD_DIM, dtype=DTYPE, device=DEVICE)
        self.out = torch.empty_like(self.q)
        self.batch, self.context = batch, context
        self.kv_bytes = 2 * batch * context * NUM_KV_HEADS * HEAD_DIM * self.q.element_size()
        self.scale = HEAD_DIM**-0.5
        self.ref = paged_attention_decode_ref(*self._args())

    def _args(self):
        return (self.q, self.k_cache, self.v_cache, self.block_tables, self.seq_lens, self.scale)

    def run(self, num_splits: int | None = None, config: DecodeConfig | None = None) -> torch.Tensor:
        return paged_attention_decode(
            *self._args(), num_splits, max_seq_len=self.context, out=self.out, config=config
        )

    def error(self) -> float:
        return _relative_error(self.out, self.ref)

    def time_graph(self, num_splits: int | None = None, config: DecodeConfig | None = None) -> float:
        """Median ms of one captured decode call, replayed (no launch overhead, like the engine)."""
        self.run(num_splits, config)  # compile outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.run(num_splits, config)
        return _median_ms(graph.replay)


def _relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """NaN (unwritten output) counts as an infinite error."""
    diff = (out.float() - ref.float()).norm() / ref.float().norm()
    return diff.item() if torch.isfinite(diff) else math.inf


def _status(err: float) -> str:
    return f"ok ({err:.1e})" if err <= TOLERANCE else f"FAIL err {err:.2g}"


def _check(case: DecodeCase, num_splits=None, config=None) -> str:
    case.out.fill_(math.nan)
    case.run(num_splits, config)
    return _status(case.error())


def bench_decode(copy_bw: float, sweep: bool) -> None:
    device = torch.device(DEVICE)
    print(f"\npaged_attention_decode  Hq={NUM_Q_HEADS} Hkv={NUM_KV_HEADS} D={HEAD_DIM} {DTYPE} block_size={BLOCK_SIZE}")
    print(f"default config {decode_config(HEAD_DIM, DTYPE)}")
    print(f"{'batch':>5} {'ctx':>5} {'splits':>6} {'check':>16} {'us':>8} {'GB/s':>7} {'% copy':>7}")
    cases = {}
    for batch, context in DECODE_SHAPES:
        case = cases[(batch, context)] = DecodeCase(batch, context)
        splits = choose_num_splits(batch, NUM_KV_HEADS, context, device)
        status = _check(case)
        ms = case.time_graph()
        bw = case.kv_bytes / (ms * 1e-3)
        row = f"{batch:5d} {context:5d} {splits:6d} {status:>16} {ms * 1e3:8.1f} {bw / 1e9:7.0f}"
        print(f"{row} {100 * bw / copy_bw:6.1f}%")
    if not sweep:
        return

    print("\nsweep: GB/s (% of copy) per launch config, heuristic split count; FAIL = wrong result")
    sweep_cases = [cases[shape] for shape in SWEEP_SHAPES]
    print(f"{'config':>28} " + " ".join(f"{f'B={c.batch} ctx={c.context}':>18}" for c in sweep_cases))
    for config in SWEEP_CONFIGS:
        cells = []
        for case in sweep_cases:
            try:
                status = _check(case, config=config)
                if status.startswith("FAIL"):
                    cells.append(status[:18])
                    continue
                bw = case.kv_bytes / (case.time_graph(config=config) * 1e-3)
                cells.append(f"{bw / 1e9:7.0f} ({100 * bw / copy_bw:4.1f}%)")
            except Exception as exc:  # e.g. out of shared memory: report and go on
                cells.append(f"error {type(exc).__name__}"[:18])
        name = f"bn={config.block_n} w={config.num_warps} s={config.num_stages}"
        print(f"{name:>28} " + " ".join(f"{c:>18}" for c in cells))

    print("\nsweep: GB/s (% of copy) per split count, default config")
    for shape, split_counts in SPLIT_SWEEPS.items():
        case = cases[shape]
        cells = []
        for splits in split_counts:
            status = _check(case, splits)
            if status.startswith("FAIL"):
                cells.append(f"{splits}: {status}")
                continue
            bw = case.kv_bytes / (case.time_graph(splits) * 1e-3)
            cells.append(f"{splits}: {bw / 1e9:.0f} ({100 * bw / copy_bw:.0f}%)")
        print(f"  B={case.batch:<3} ctx={case.context}: " + "  ".join(cells))


def bench_prefill() -> None:
    shape = f"Hq={NUM_Q_HEADS} Hkv={NUM_KV_HEADS} D={HEAD_DIM} {DTYPE} block_size={BLOCK_SIZE}"
    print(f"\npaged_attention_prefill  {shape}")
    print(f"{'q_len':>6} {'seq_len':>7} {'check':>16} {'us':>8} {'TFLOP/s':>8}")
    for q_len, seq_len in PREFILL_SHAPES:
        case = DecodeCase(1, seq_len)  # reuse the paged K/V; q is replaced
        q = torch.randn(q_len, NUM_Q_HEADS, HEAD_DIM, dtype=DTYPE, device=DEVICE)
        cu = torch.tensor([0, q_len], dtype=torch.int32, device=DEVICE)
        args = (q, case.k_cache, case.v_cache, case.block_tables, cu, case.seq_lens, case.scale, q_len)
        out = paged_attention_prefill(*args)
        status = _status(_relative_error(out, paged_attention_prefill_ref(*args)))
        ms = _median_ms(lambda: paged_attention_prefill(*args, out=out))
        visible_keys = q_len * (seq_len - q_len) + q_len * (q_len + 1) // 2
        flops = 4 * NUM_Q_HEADS * HEAD_DIM * visible_keys  # QK^T and PV, 2 flops per multiply-add
        print(f"{q_len:6d} {seq_len:7d} {status:>16} {ms * 1e3:8.1f} {flops / (ms * 1e-3) / 1e12:8.1f}")


class PrefixCase:
    """One sequence: `new` queries after `cached` keys, over `layers` separate paged caches sharing one
    block table (as the engine's layers do): a graph of one call per layer reads each layer's K/V once,
    so L2 holds nothing from the previous layer, as in a real forward pass."""

    def __init__(self, new: int, cached: int, layers: int):
        self.new, self.seq_len, self.layers = new, new + cached, layers
        blocks = triton.cdiv(self.seq_len, BLOCK_SIZE)
        shape = (blocks + 1, BLOCK_SIZE, NUM_KV_HEADS, HEAD_DIM)
        self.caches = [
            (torch.randn(shape, dtype=DTYPE, device=DEVICE), torch.randn(shape, dtype=DTYPE, device=DEVICE))
            for _ in range(layers)
        ]
        self.block_tables = torch.randperm(blocks + 1, device=DEVICE)[:blocks].view(1, blocks).int()
        self.seq_lens = torch.tensor([self.seq_len], dtype=torch.int32, device=DEVICE)
        self.cu = torch.tensor([0, new], dtype=torch.int32, device=DEVICE)
        rows = max(new, PREFIX_GRAPH_ROWS)
        self.q = torch.randn(rows, NUM_Q_HEADS, HEAD_DIM, dtype=DTYPE, device=DEVICE)
        self.out = torch.empty_like(self.q)
        self.scale = HEAD_DIM**-0.5
        self.kv_bytes = 2 * self.seq_len * NUM_KV_HEADS * HEAD_DIM * self.q.element_size()  # per layer
        visible_keys = new * cached + new * (new + 1) // 2
        self.flops = 4 * NUM_Q_HEADS * HEAD_DIM * visible_keys  # per layer: QK^T and PV
        k0, v0 = self.caches[0]
        self.ref = paged_attention_prefill_ref(
            self.q[:new], k0, v0, self.block_tables, self.cu, self.seq_lens, self.scale, new
        )

    def call(self, path: str, rows: int, max_q_len: int, layer: int = 0, **kwargs) -> None:
        """path 'old' (paged_attention_prefill) or 'split'; rows of q (>= new: graph padding)."""
        k, v = self.caches[layer]
        args = (self.q[:rows], k, v, self.block_tables, self.cu, self.seq_lens, self.scale, max_q_len)
        if path == "old":
            paged_attention_prefill(*args, out=self.out[:rows], **kwargs)
        else:
            paged_attention_prefill_split(*args, out=self.out[:rows], **kwargs)

    def check(self, path: str, rows: int, max_q_len: int, **kwargs) -> str:
        self.out.fill_(math.nan)
        self.call(path, rows, max_q_len, **kwargs)
        err = _relative_error(self.out[: self.new], self.ref)
        if self.out[self.new : rows].isfinite().any():
            return "FAIL pad rows written"
        return _status(err)

    def time_us(self, path: str, rows: int, max_q_len: int, layers: int, **kwargs) -> float:
        """Median µs per call of a graph replaying `layers` calls, one per layer's cache."""
        self.call(path, rows, max_q_len, **kwargs)  # compile outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for layer in range(layers):
                self.call(path, rows, max_q_len, layer, **kwargs)
        return _median_ms(graph.replay) * 1e3 / layers


def bench_prefix(copy_bw: float, sweep: bool) -> None:
    device = torch.device(DEVICE)
    new, cached = PREFIX_NEW, PREFIX_CACHED
    case = PrefixCase(new, cached, PREFIX_LAYERS)
    gqa_pad = triton.next_power_of_2(NUM_Q_HEADS // NUM_KV_HEADS)
    rows_g, max_seq_g = PREFIX_GRAPH_ROWS, PREFIX_GRAPH_MAX_SEQ
    print(f"\nprefix reuse: 1 sequence, {new} new queries after {cached} cached tokens (seq_len {case.seq_len})")
    print(f"  Hq={NUM_Q_HEADS} Hkv={NUM_KV_HEADS} D={HEAD_DIM} {DTYPE} block_size={BLOCK_SIZE}; "
          f"K+V {case.kv_bytes / 1e6:.2f} MB and {case.flops / 1e9:.2f} GFLOP per layer")
    print(f"  old = paged_attention_prefill {prefill_config(HEAD_DIM, DTYPE, gqa_pad, new)}")
    print(f"  split = paged_attention_prefill_split {prefill_split_config(HEAD_DIM, DTYPE, gqa_pad, new)}")
    print(f"  'graph' rows: q of {rows_g} rows, max_q_len {rows_g}, max_seq_len {max_seq_g} (as PrefillGraphs)")
    print(f"  us/1 = graph of one call (launch floor included); us/{PREFIX_LAYERS} = per call in a graph of "
          f"{PREFIX_LAYERS} calls over {PREFIX_LAYERS} layers' caches; GB/s, TFLOP/s from us/{PREFIX_LAYERS}")
    split_e = choose_prefill_splits(1, NUM_Q_HEADS, NUM_KV_HEADS, HEAD_DIM, DTYPE, new, case.seq_len, device)
    split_g = choose_prefill_splits(1, NUM_Q_HEADS, NUM_KV_HEADS, HEAD_DIM, DTYPE, rows_g, max_seq_g, device)
    variants = [  # (name, path, rows, max_q_len, kwargs)
        ("old", "old", new, new, {}),
        ("old graph", "old", rows_g, rows_g, {}),
        (f"split={split_e}", "split", new, new, {"max_seq_len": case.seq_len}),
        (f"split={split_g} graph", "split", rows_g, rows_g, {"max_seq_len": max_seq_g}),
    ]
    print(f"{'path':>16} {'check':>16} {'us/1':>7} {f'us/{PREFIX_LAYERS}':>7} {'GB/s':>6} {'% copy':>7} "
          f"{'TFLOP/s':>7} {'speedup':>7}")
    base = None
    for name, path, rows, max_q_len, kwargs in variants:
        status = case.check(path, rows, max_q_len, **kwargs)
        us1 = case.time_us(path, rows, max_q_len, 1, **kwargs)
        us = case.time_us(path, rows, max_q_len, PREFIX_LAYERS, **kwargs)
        base = base or us
        bw = case.kv_bytes / (us * 1e-6)
        print(f"{name:>16} {status:>16} {us1:7.1f} {us:7.1f} {bw / 1e9:6.0f} {100 * bw / copy_bw:6.1f}% "
              f"{case.flops / (us * 1e-6) / 1e12:7.1f} {base / us:6.1f}x")
    if not sweep:
        return

    print(f"\nsweep: split path, graph shape (q of {rows_g} rows, max_q_len {rows_g}), us per call in the "
          f"{PREFIX_LAYERS}-layer graph")
    print(f"{'config':>28} " + " ".join(f"{f's={n}':>7}" for n in PREFIX_SWEEP_SPLITS))
    best = (math.inf, None, None)
    for config in PREFIX_SWEEP_CONFIGS:
        cells = []
        for splits in PREFIX_SWEEP_SPLITS:
            kwargs = {"num_splits": splits, "config": config}
            try:
                status = case.check("split", rows_g, rows_g, **kwargs)
                if status.startswith("FAIL"):
                    cells.append("FAIL")
                    continue
                us = case.time_us("split", rows_g, rows_g, PREFIX_LAYERS, **kwargs)
                cells.append(f"{us:7.1f}")
                if us < best[0]:
                    best = (us, config, splits)
            except Exception as exc:  # e.g. out of shared memory: report and go on
                cells.append(f"{type(exc).__name__}"[:7])
        name = f"bm={config.block_m} bn={config.block_n} w={config.num_warps} s={config.num_stages}"
        print(f"{name:>28} " + " ".join(f"{c:>7}" for c in cells))
    if best[1] is not None:
        print(f"best: {best[0]:.1f} us with {best[1]}, num_splits={best[2]}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-sweep", action="store_true", help="skip the config and split-count sweeps")
    parser.add_argument("--only", nargs="+", choices=["decode", "prefill", "prefix"],
                        default=["decode", "prefill", "prefix"], help="sections to run (default: all)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("benchmarks.kernels needs a CUDA GPU: torch.cuda.is_available() is False")
    torch.manual_seed(0)
    start = time.perf_counter()
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, triton {triton.__version__}")
    copy_bw = copy_bandwidth()
    print(f"device copy bandwidth (read + write): {copy_bw / 1e9:.0f} GB/s")
    if "decode" in args.only:
        bench_decode(copy_bw, sweep=not args.no_sweep)
    if "prefill" in args.only:
        bench_prefill()
    if "prefix" in args.only:
        bench_prefix(copy_bw, sweep=not args.no_sweep)
    print(f"\ndone in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
