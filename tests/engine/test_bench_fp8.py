"""benchmarks.fp8 runs its CPU smoke path: three arms, decode rates, KV blocks and quality vs the first arm."""
import json

from benchmarks.fp8 import main


def test_fp8_benchmark_smoke_path_runs(tmp_path):
    out = tmp_path / "fp8.json"
    assert main(["--smoke", "--batches", "1,2", "--out", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    assert [r["arm"] for r in results] == ["bf16", "fp8", "fp8+fp8kv"]
    assert results[1]["weight_bytes"] < results[0]["weight_bytes"]  # the projections are one byte a weight
    assert all(r["decode_tok_s"][b] > 0 for r in results for b in ("1", "2"))
    # fp32 on the CPU: an e4m3 KV block is a quarter of the size
    assert results[2]["blocks_in_16GiB"] == 4 * results[1]["blocks_in_16GiB"]
    for r in results[1:]:
        q = r["quality_vs_bf16"]
        assert q["positions"] == 64 and 0.99 < q["cosine_mean"] <= 1.0 + 1e-6
