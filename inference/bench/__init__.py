"""Benchmarks: `python -m inference.bench` (throughput / TTFT / per-token latency against HF
transformers), `--prefix` (TTFT cold vs pinned system prompt), `--prefix-overhead` (the prefix cache's cost at 0% hits)
and `--gpu` (the H200 suite)."""
