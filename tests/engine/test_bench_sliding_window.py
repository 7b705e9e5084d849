"""benchmarks.sliding_window runs its CPU smoke path: global and windowed attention, checked and timed."""
import json

from benchmarks.sliding_window import main


def test_sliding_window_benchmark_smoke_path_runs(tmp_path):
    out = tmp_path / "window.json"
    assert main(["--smoke", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert (data["device"], data["context"], data["window"]) == ("cpu", 512, 64)
    assert [(r["batch"], r["q_len"]) for r in data["results"]] == [(1, 1), (16, 1), (1, 32)]
    assert all(r["global_ms"] > 0 and r["window_ms"] > 0 for r in data["results"])
