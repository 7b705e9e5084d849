"""Benchmarks: `python -m inference.bench` (throughput / TTFT / per-token latency against HF
transformers), `--prefix` (TTFT cold vs pinned system prompt) and `--gpu` (the H200 suite)."""
