"""Run from the repository root: `PYTHONPATH=. python docs/experiments/2026-12-03-pdl/hostprobe.py`.

Where the host time of a pinned chat turn goes on the H200's host: the statements of PrefillGraphs.run
timed one by one (perf_counter, no profiler), then cProfile over 30 pinned requests (its own overhead
inflates every call; read it for proportions).
"""
import cProfile
import pstats
import random
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, "docs/experiments/2026-12-03")
from micro import build_engine  # noqa: E402

from inference.bench.prefix import pin_and_wait, ttft  # noqa: E402
from inference.cuda_graphs import PrefillGraphs  # noqa: E402

marks: dict[str, list[float]] = {}


def timed_run(self, out):
    t = [time.perf_counter()]
    s = out.scheduled[0]
    seq, start, n = s.seq, s.start, s.num_new_tokens
    size = next(z for z in self.SIZES if z >= n)
    big, tail = self.SIZES[-1], self.tail
    bs = self.runner.block_size
    table = seq.block_table
    h = self.host_np
    t.append(time.perf_counter())
    positions = np.arange(start, start + n)
    h[:n] = seq.token_ids(start, start + n)
    h[n:size] = 0
    h[big:big + n] = positions
    h[big + n:big + size] = 0
    h[2 * big:2 * big + n] = np.asarray(table)[positions // bs] * bs + positions % bs
    h[2 * big + n:2 * big + size] = -1
    h[tail:tail + 3] = (start + n, n, n - 1)
    used = tail + 3 + len(table)
    h[tail + 3:used] = table
    t.append(time.perf_counter())
    dst, src = self.staged[:used], self.host[:used]
    t.append(time.perf_counter())
    dst.copy_(src, non_blocking=True)
    t.append(time.perf_counter())
    self.graphs[size].replay()
    t.append(time.perf_counter())
    for name, a, b in zip(("setup", "numpy", "slices", "copy_", "replay"), t, t[1:]):
        marks.setdefault(name, []).append((b - a) * 1e6)
    return self.logits[size]


def main():
    engine = build_engine()
    rng = random.Random(3)
    vocab = engine.model_args.vocab_size
    system = [rng.randrange(100, vocab - 100) for _ in range(2000)]
    pin_and_wait(engine, "p-system", system, "p")
    PrefillGraphs.run = timed_run
    for i in range(5):
        ttft(engine, f"w{i}", system + [rng.randrange(100, vocab - 100) for _ in range(50)], "p", torch.cuda.synchronize)
    marks.clear()
    totals = [ttft(engine, f"t{i}", system + [rng.randrange(100, vocab - 100) for _ in range(50)], "p",
                   torch.cuda.synchronize)[0] * 1e6 for i in range(20)]
    print(f"pinned TTFT median {statistics.median(totals):.0f} us; PrefillGraphs.run statements, median us:")
    for k, v in marks.items():
        print(f"   {k:8s} {statistics.median(v):7.1f}  (min {min(v):.1f})")
    t0 = time.perf_counter()
    for _ in range(2000):
        np.arange(10)
    print(f"   reference: np.arange(10) {(time.perf_counter() - t0) / 2000 * 1e6:.2f} us per call on this host")
    prof = cProfile.Profile()
    prof.enable()
    for i in range(30):
        ttft(engine, f"c{i}", system + [rng.randrange(100, vocab - 100) for _ in range(50)], "p", torch.cuda.synchronize)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(35)


if __name__ == "__main__":
    main()
