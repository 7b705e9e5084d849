"""Summaries of a run: throughput and TTFT / TPOT / ITL / end-to-end percentiles (milliseconds)."""
from __future__ import annotations

import statistics

PERCENTILES = (50, 90, 99)


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def distribution(values: list[float]) -> dict:
    """{"mean", "p50", "p90", "p99"} in milliseconds (None when there are no values)."""
    if not values:
        return {"mean": None, **{f"p{q}": None for q in PERCENTILES}}
    return {"mean": 1e3 * statistics.fmean(values), **{f"p{q}": 1e3 * percentile(values, q) for q in PERCENTILES}}


def summarize(results, seconds: float) -> dict:
    """results: RequestResult-like objects (ok, error, prompt_tokens, output_tokens, ttft, tpot, itls, e2e)."""
    ok = [r for r in results if r.ok]
    failed = [r for r in results if not r.ok]
    output_tokens = sum(r.output_tokens for r in ok)
    errors: dict[str, int] = {}
    for r in failed:
        errors[r.error] = errors.get(r.error, 0) + 1
    return {
        "num_requests": len(results), "completed": len(ok), "failed": len(failed),
        "errors": dict(sorted(errors.items(), key=lambda kv: -kv[1])[:5]),
        "seconds": seconds,
        "prompt_tokens": sum(r.prompt_tokens for r in ok), "output_tokens": output_tokens,
        "request_throughput": len(ok) / seconds if seconds else 0.0,
        "output_throughput": output_tokens / seconds if seconds else 0.0,
        "ttft_ms": distribution([r.ttft for r in ok if r.ttft is not None]),
        "tpot_ms": distribution([r.tpot for r in ok if r.tpot is not None]),
        "itl_ms": distribution([gap for r in ok for gap in r.itls]),
        "e2e_ms": distribution([r.e2e for r in ok if r.e2e is not None]),
    }
