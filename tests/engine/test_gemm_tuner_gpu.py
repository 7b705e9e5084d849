"""cuBLASLt called directly and the timed choice of algorithms. Needs a GPU."""
import pytest
import torch
from transformers import LlamaConfig

from inference import cublaslt
from benchmarks.gpu import SMOLLM2_135M
from inference.config import EngineConfig
from inference.engine import LLMEngine
from inference.gemm_tuner import projection_groups, tune_group
from inference.models import ModelArgs
from inference.models.llama import Linear
from inference.sampling_params import SamplingParams

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="cuBLASLt needs a GPU")


def _weight(n, k, col_major, dtype=torch.bfloat16):
    w = torch.randn(n, k, device="cuda", dtype=dtype) * 0.02
    return w.t().contiguous().t() if col_major else w


def _rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("col_major", [False, True])
@pytest.mark.parametrize("rows", [1, 50, 64, 128, 300])
def test_every_candidate_computes_x_times_w_transposed(rows, col_major, dtype):
    torch.manual_seed(rows)
    w = _weight(3072, 1024, col_major, dtype)
    x = torch.randn(rows, 1024, device="cuda", dtype=dtype)
    problem = cublaslt.Problem.of(x, w)
    assert problem == cublaslt.Problem(rows, 3072, 1024, col_major, dtype)
    plan = cublaslt.Plan(problem)
    candidates = plan.candidates()
    assert candidates
    ref = x.double() @ w.double().t()
    for algo, _ in candidates:
        y = plan.run(x, w, algo)
        assert y.shape == (rows, 3072) and y.dtype == dtype
        assert _rel(y, ref) < 1e-2, cublaslt.describe(algo)


def test_problems_cublaslt_does_not_run():
    x = torch.randn(4, 64, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(32, 64, device="cuda", dtype=torch.bfloat16)
    assert cublaslt.Problem.of(x.float(), w.float()) is None  # fp32
    assert cublaslt.Problem.of(x.t(), w[:, :4]) is None  # x not contiguous
    assert cublaslt.Problem.of(x, w[:, ::2]) is None  # strided weight
    assert cublaslt.Problem.of(x[:, :32], w) is None  # inner sizes differ


def test_tuned_linears_compute_the_same_product_eagerly_and_in_a_graph():
    torch.manual_seed(0)
    mods = [Linear(1024, 3072, bias=False).to("cuda", torch.bfloat16) for _ in range(4)]
    for m in mods:
        m.weight = torch.nn.Parameter(m.weight.t().contiguous().t(), requires_grad=False)
    assert projection_groups(torch.nn.ModuleList(mods)) == [mods]
    for rows in (1, 64, 128):
        choice = tune_group(mods, rows)
        assert choice.best_us <= choice.torch_us
        assert (choice.algo is None) == (rows not in mods[0].tuned)
    # Whatever the timing chose, make 64 rows run a candidate, so the path below is exercised.
    x = torch.randn(64, 1024, device="cuda", dtype=torch.bfloat16)
    plan = cublaslt.Plan(cublaslt.Problem.of(x, mods[0].weight))
    algo = plan.candidates()[-1][0]
    for m in mods:
        m.tuned[64] = (plan, algo)
    with torch.inference_mode():
        eager = [m(x) for m in mods]
        for m, y in zip(mods, eager):
            assert _rel(y, torch.nn.functional.linear(x, m.weight)) < 1e-2
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                captured = [m(x) for m in mods]
        torch.cuda.current_stream().wait_stream(stream)
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        for m, y in zip(mods, captured):  # the replay read the new x: same algorithm, same bits
            assert torch.equal(y, plan.run(x, m.weight, algo))


def test_engine_tunes_its_projections_before_capturing_graphs():
    config = EngineConfig(model="test", device="cuda", dtype="bfloat16", num_kv_blocks=256, max_model_len=256,
                          max_num_seqs=4, seed=0, async_scheduling=False)
    engine = LLMEngine(config, progress=False, model_args=ModelArgs.from_hf_config(LlamaConfig(**SMOLLM2_135M)))
    choices = engine.runner.gemm_choices
    # SmolLM2 ties its lm_head to the embedding: qkv, o, gate_up, down at each captured row count.
    rows = sorted({1, 2, 4, 16, 32, 64, 128})
    assert sorted({c.rows for c in choices}) == rows
    assert len(choices) == 4 * len(rows)
    assert all(c.best_us <= c.torch_us for c in choices)
    seq = engine.add_request("r", list(range(100, 140)), SamplingParams(temperature=0, max_tokens=8,
                                                                          ignore_eos=True))
    while engine.has_unfinished():
        engine.step()
    assert len(seq.output_token_ids) == 8
