"""Does a weight read into L2 just before a skinny GEMM make that GEMM faster, and how much of L2 holds?

Stop 18's L2 prefetch of the o-projection's weight (33.5 MB) gained nothing, though the H100 and H200
report 50 and 60 MB of L2. One reading: data that every SM reads is held in both halves of the L2, so
only about half the L2 is there for it. This script tests that reading on any GPU in a few seconds:

- re-read bandwidth: read a buffer of S MB once (to fill L2), then time a second read, S = 4..96 MB;
- the o, qkv and down GEMMs (1 and 64 rows, bf16, cuBLAS via F.linear) after a plain read of the
  first fraction f of the weight, f = 0 .. 1, with L2 flushed before each trial. triton's do_bench
  is not used: it flushes L2 itself, right before the timed call, so it cannot time a call after a
  read-ahead.

    PYTHONPATH=. python docs/experiments/2026-12-07/l2_retention.py
"""
import statistics

import torch
import torch.nn.functional as F


def median_us(fn, setup, reps=25):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        setup()
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main():
    dev = "cuda"
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, {props.multi_processor_count} SMs, L2 {getattr(props, 'L2_cache_size', 0) / 2**20:.0f} MB, "
          f"torch {torch.__version__}")
    flush_buf = torch.ones(256 * 2**20, dtype=torch.bfloat16, device=dev)

    def flush():
        flush_buf.sum()  # 512 MB read: nothing of ours is left in L2, and no dirty lines

    print("re-read of a buffer just read (bandwidth as if each byte were read once):")
    for mb in (4, 8, 16, 24, 32, 40, 48, 56, 64, 96):
        buf = torch.ones(mb * 2**20 // 2, dtype=torch.bfloat16, device=dev)
        cold = median_us(lambda: buf.sum(), flush)
        warm = median_us(lambda: buf.sum(), lambda: (flush(), buf.sum()))
        print(f"  {mb:3d} MB: cold {cold:7.1f} us ({mb * 2**20 / cold / 1e6:5.2f} TB/s)  "
              f"warm {warm:7.1f} us ({mb * 2**20 / warm / 1e6:5.2f} TB/s)")

    torch.manual_seed(0)
    for name, out_f, in_f in (("o", 4096, 4096), ("qkv", 6144, 4096), ("down", 4096, 14336)):
        w = torch.randn(out_f, in_f, device=dev, dtype=torch.bfloat16) / in_f ** 0.5
        for rows in (1, 64):
            x = torch.randn(rows, in_f, device=dev, dtype=torch.bfloat16)
            F.linear(x, w)
            line = []
            for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
                n = int(out_f * frac)

                def setup(n=n):
                    flush()
                    if n:
                        w[:n].sum()  # reads the first n output rows' weights, contiguous
                line.append(f"f={frac:.2f} {median_us(lambda: F.linear(x, w), setup):6.1f}")
            mb = out_f * in_f * 2 / 2**20
            print(f"  {name:4s} {mb:5.1f} MB, {rows:2d} rows, GEMM us after reading a fraction f of W: "
                  + "  ".join(line))


if __name__ == "__main__":
    main()
