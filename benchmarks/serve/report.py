"""The run's tables: one row per (endpoint, concurrency, rate) with the engine beside the server, the
pinned-vs-cold probe, and the figures the issue's targets are stated in."""
from __future__ import annotations


def _ms(d: dict, key: str) -> str:
    value = d.get(key)
    return "-" if value is None else f"{value:,.1f}"


def run_rows(runs: list[dict]) -> str:
    head = ("| endpoint | conc. | rate | ok / failed | server tok/s | engine tok/s | server / engine | "
            "TTFT p50 / p90 / p99 ms | engine TTFT p50 ms | TPOT p50 ms | ITL p50 / p99 ms | E2E p50 / p99 ms |")
    lines = [head, "|" + "---|" * 12]
    for r in runs:
        s, e = r["server"], r.get("engine")
        ratio = f"**{r['ratio']:.2f}**" if r.get("ratio") is not None else "-"
        rate = "inf" if r["request_rate"] == float("inf") else f"{r['request_rate']:g}/s"
        engine_tok_s = f"{e['output_throughput']:,.1f}" if e else "-"
        lines.append(
            f"| {r['endpoint']} | {r['concurrency'] or '-'} | {rate} | {s['completed']} / {s['failed']} | "
            f"{s['output_throughput']:,.1f} | {engine_tok_s} | {ratio} | "
            f"{_ms(s['ttft_ms'], 'p50')} / {_ms(s['ttft_ms'], 'p90')} / {_ms(s['ttft_ms'], 'p99')} | "
            f"{_ms(e['ttft_ms'], 'p50') if e else '-'} | {_ms(s['tpot_ms'], 'p50')} | "
            f"{_ms(s['itl_ms'], 'p50')} / {_ms(s['itl_ms'], 'p99')} | "
            f"{_ms(s['e2e_ms'], 'p50')} / {_ms(s['e2e_ms'], 'p99')} |")
        for error, count in s["errors"].items():
            lines.append(f"|  | error x{count}: {error[:160]} |" + " |" * 10)
    return "\n".join(lines)


def probe_rows(api: dict | None, engine: dict | None) -> str:
    lines = ["| pinned vs cold (chat) | pinned TTFT ms | cold TTFT ms | cold / pinned | pinned, busy ms | "
             "busy / idle pinned | cached tokens pinned / cold |", "|" + "---|" * 7]
    for name, p in (("API /v1/chat/completions", api), ("engine (LLMEngine)", engine)):
        if not p or "pinned_ttft_ms" not in p:
            continue
        busy = f"{p['busy_pinned_ttft_ms']:.1f}" if "busy_pinned_ttft_ms" in p else "-"
        ratio = f"{p['busy_over_idle_pinned']:.2f}x" if "busy_over_idle_pinned" in p else "-"
        lines.append(f"| {name} | {p['pinned_ttft_ms']:.1f} | {p['cold_ttft_ms']:.1f} | {p['cold_over_pinned']:.2f}x | "
                     f"{busy} | {ratio} | {p['pinned_cached_tokens']:g} / {p['cold_cached_tokens']:g} |")
    return "\n".join(lines)


def targets(runs: list[dict], api: dict | None, engine: dict | None) -> list[str]:
    """The issue's target figures that this run measured."""
    out = []
    by = {(r["endpoint"], r["concurrency"]): r for r in runs if r["request_rate"] == float("inf")}
    for (endpoint, conc), r in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        if r.get("ratio") is not None:
            out.append(f"server / engine throughput, {endpoint}, {conc} concurrent: {r['ratio']:.2f}")
    for conc in sorted({c for _, c in by}, key=lambda c: c or 0):
        ws, chat = by.get(("ws", conc)), by.get(("chat", conc))
        if ws and chat and chat["server"]["output_throughput"]:
            out.append(f"WebSocket chat / API chat throughput, {conc} concurrent: "
                       f"{ws['server']['output_throughput'] / chat['server']['output_throughput']:.2f}")
    one = by.get(("completions", 1))
    if one and one.get("engine") and one["server"]["ttft_ms"]["p50"] is not None:
        out.append(f"TTFT at 1 concurrent, server minus engine (completions, p50): "
                   f"{one['server']['ttft_ms']['p50'] - one['engine']['ttft_ms']['p50']:+.1f} ms")
    if api and engine and "pinned_ttft_ms" in api and "pinned_ttft_ms" in engine:
        out.append(f"pinned TTFT through the API minus the engine's, idle: "
                   f"{api['pinned_ttft_ms'] - engine['pinned_ttft_ms']:+.1f} ms")
        out.append(f"cold / pinned through the API vs the engine's: {api['cold_over_pinned']:.2f}x vs "
                   f"{engine['cold_over_pinned']:.2f}x = {api['cold_over_pinned'] / engine['cold_over_pinned']:.0%}")
    if api and "busy_over_idle_pinned" in api:
        out.append(f"API pinned TTFT with {api['num_background']} other streams decoding / idle: "
                   f"{api['busy_over_idle_pinned']:.2f}x")
    rated = [r for r in runs if r["request_rate"] != float("inf")]
    for r in rated:
        p99 = r["server"]["ttft_ms"]["p99"]
        out.append(f"{r['endpoint']} at {r['request_rate']:g} req/s offered: served "
                   f"{r['server']['request_throughput']:.2f} req/s, TTFT p99 {p99 if p99 is None else round(p99)} ms")
    caps = [r["engine"]["request_throughput"] for r in runs if r.get("engine")]
    if rated and caps:
        out.append(f"engine's own capacity (its best closed-loop run): {max(caps):.2f} req/s")
    return out
