"""benchmarks.models runs its CPU smoke path on the MoE family: engine and HF on the same random weights,
the fused MoE layer against its floor, and fp32 greedy tokens equal to HF's (exact on the CPU)."""
import json

from benchmarks.models import main


def test_models_benchmark_smoke_path_runs(tmp_path):
    out = tmp_path / "models.json"
    assert main(["--smoke", "--only", "qwen3-30b-a3b", "--batches", "1,2", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    (result,) = data["results"]
    assert result["family"] == "qwen3-30b-a3b"
    assert all(result["engine_tok_s"][b] > 0 and result["hf_tok_s"][b] > 0 for b in ("1", "2"))
    assert [row["batch"] for row in result["moe_layer"]] == [1, 2]
    assert all(row["us_per_layer"] > 0 and 2 <= row["experts_routed"] <= 4 for row in result["moe_layer"])
    # fp32 on the CPU: the engine and HF give the same greedy tokens, first to last
    agreement = result["agreement"]
    assert agreement["identical_prefix_tokens"] == agreement["of_tokens"] == 64
    assert data["fp32_equality"] == [{"family": "qwen3-30b-a3b", "identical": 3, "of": 3}]
