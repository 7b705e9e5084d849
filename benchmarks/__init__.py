"""Benchmarks, outside the product packages: `python -m benchmarks` (CPU engine vs HF `generate`),
`--prefix` (TTFT, cold vs pinned system prompt), `--prefix-overhead` (the prefix cache's cost at 0% hits),
`--gpu` (the GPU suite); `python -m benchmarks.kernels` (the attention kernels)."""
