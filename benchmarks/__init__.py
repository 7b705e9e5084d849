"""Benchmarks, outside the product packages: `python -m benchmarks` (CPU engine vs HF `generate`),
`--prefix` (TTFT, cold vs pinned system prompt), `--prefix-overhead` (the prefix cache's cost at 0% hits),
`--gpu` (the GPU suite); `python -m benchmarks.kernels` (the attention kernels); `python -m benchmarks.fp8`
(bf16 vs FP8 weights vs FP8 weights + FP8 KV on one GPU; `--smoke` on the CPU)."""
