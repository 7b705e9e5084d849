"""Benchmarks, outside the product packages: `python -m benchmarks` (CPU engine vs HF generate), `--prefix`, `--prefix-overhead`, `--gpu`; `python -m benchmarks.kernels` (attention kernels).
transformers), `--prefix` (TTFT cold vs pinned system prompt), `--prefix-overhead` (the prefix cache's cost at 0% hits)
and `--gpu` (the H200 suite)."""
