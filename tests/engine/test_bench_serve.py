"""`python -m benchmarks.serve` on the CPU with a tiny random model: a real server (daphne, started by
the benchmark as deploy/run.sh starts it), a few requests on each endpoint, the offline engine on the
same prompts and the pinned-vs-cold probe. Checks the report's fields, never its timings."""
import json
import math

from benchmarks.serve.__main__ import main
from benchmarks.serve.clients import RequestResult
from benchmarks.serve.stats import percentile, summarize

INPUT_LEN, OUTPUT_LEN, NUM_PROMPTS = 16, 6, 3


def test_percentiles_interpolate_and_the_summary_counts_failures_apart():
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 90) == 4.6
    assert percentile([7.0], 99) == 7.0
    ok = RequestResult(ok=True, prompt_tokens=5, output_tokens=3, sent_at=0.0, ttft=0.1, e2e=0.5,
                       chunk_times=[0.1, 0.3, 0.5])
    bad = RequestResult(ok=False, error="HTTP 503: loading", prompt_tokens=5, output_tokens=9)
    s = summarize([ok, bad, bad], 2.0)
    assert (s["completed"], s["failed"], s["errors"]) == (1, 2, {"HTTP 503: loading": 2})
    assert s["output_tokens"] == 3 and s["output_throughput"] == 1.5 and s["request_throughput"] == 0.5
    assert s["tpot_ms"]["p50"] == 200.0 and s["itl_ms"]["p50"] == 200.0 and s["e2e_ms"]["p99"] == 500.0


def test_cpu_smoke_run_serves_every_endpoint_and_reports_sane_fields(tmp_path, smol_path, capsys):
    out = tmp_path / "serve.json"
    rc = main(["--device", "cpu", "--model-dir", str(tmp_path / "models"), "--tokenizer-from", str(smol_path),
               "--input-len", str(INPUT_LEN), "--output-len", str(OUTPUT_LEN), "--num-prompts", str(NUM_PROMPTS),
               "--sweep", "--sweep-concurrency", "1,2", "--request-rate", "inf,20",
               "--system-len", "200", "--question-len", "10", "--probe-repeats", "2", "--probe-background", "2",
               "--work-dir", str(tmp_path / "work"), "--out", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0
    report = json.loads(out.read_text())
    runs = report["runs"]
    assert {(r["endpoint"], r["concurrency"], r["request_rate"]) for r in runs} == {
        (e, c, r) for e in ("completions", "chat", "ws") for c in (1, 2) for r in (math.inf, 20.0)}
    for run in runs:
        s = run["server"]
        assert (s["completed"], s["failed"]) == (NUM_PROMPTS, 0), (run["endpoint"], s["errors"])
        assert s["output_tokens"] == NUM_PROMPTS * OUTPUT_LEN  # ignore_eos: exactly --output-len each
        if run["endpoint"] == "completions":  # token ids, sent as they are (the tenant has no system prompt)
            assert s["prompt_tokens"] == NUM_PROMPTS * INPUT_LEN
        ttft = s["ttft_ms"]
        assert 0 < ttft["p50"] <= ttft["p90"] <= ttft["p99"]
        assert s["tpot_ms"]["p50"] > 0 and s["itl_ms"]["p50"] > 0 and s["e2e_ms"]["p50"] >= ttft["p50"]
        assert s["output_throughput"] > 0 and s["request_throughput"] > 0
        if run["request_rate"] == math.inf:  # closed loop: the engine served the same prompts
            e = run["engine"]
            assert (e["completed"], e["output_tokens"]) == (NUM_PROMPTS, NUM_PROMPTS * OUTPUT_LEN)
            assert run["same_prompt_tokens"] and run["ratio"] > 0
        else:
            assert "engine" not in run
    api, engine = report["probe"]["api"], report["probe"]["engine"]
    assert api["failed"] == 0
    # The platform pinned the tenant's prompt: both sides hit the pinned prefix (the API's count has been
    # seen one token short of the engine's: within a block), and cold requests hit nothing.
    assert api["pinned_cached_tokens"] > 0 and engine["pinned_cached_tokens"] > 0
    assert abs(api["pinned_cached_tokens"] - engine["pinned_cached_tokens"]) < 16
    assert api["cold_cached_tokens"] == engine["cold_cached_tokens"] == 0
    assert abs(api["prompt_tokens"] - engine["prompt_tokens"]) < 16
    for side in (api, engine):
        assert side["pinned_ttft_ms"] > 0 and side["cold_ttft_ms"] > 0 and side["busy_pinned_ttft_ms"] > 0
    assert "| endpoint | conc. |" in printed and "server / engine throughput, completions, 2 concurrent" in printed
    assert "pinned TTFT through the API minus the engine's" in printed
