"""`python -m benchmarks.structured --smoke`: the runs' bookkeeping and output, not their timings."""
import json

from benchmarks.structured import main


def test_smoke_run_times_every_mix_and_the_grammar_work(tmp_path, capsys):
    out = tmp_path / "structured.json"
    assert main(["--smoke", "--out", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    mixes = [r for r in results if "constrained" in r]
    assert [r["constrained"] for r in mixes] == [0.0, 0.5, 1.0]
    assert all(r["steps"] > 0 and r["wall_ms"] > 0 and r["cpu_ms"] > 0 for r in mixes)
    assert mixes[0]["wall_vs_unconstrained"] == 1.0
    assert results[-1]["rows"] == 8 and results[-1]["grammar_work_ms"] > 0
    assert "grammar's own work for 8 rows" in capsys.readouterr().out
