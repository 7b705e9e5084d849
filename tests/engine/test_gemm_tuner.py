"""The projections' Linear: torch's product unless a timed cuBLASLt choice exists for exactly this
problem (the GPU side is tests/engine/test_gemm_tuner_gpu.py)."""
import torch

from inference import cublaslt
from inference.models.llama import Linear


class _RefusingPlan:
    """A choice for another problem than the call's: running it would be a bug."""

    def __init__(self, problem):
        self.problem = problem

    def run(self, x, w, algo):
        raise AssertionError("a choice for another problem was run")


def test_untuned_linear_is_torch_linear():
    torch.manual_seed(0)
    lin = Linear(32, 48, bias=True)
    x = torch.randn(5, 32)
    assert torch.equal(lin(x), torch.nn.functional.linear(x, lin.weight, lin.bias))


def test_a_choice_runs_only_for_its_own_problem():
    torch.manual_seed(0)
    lin = Linear(32, 48, bias=False)
    lin.tuned[5] = (_RefusingPlan(cublaslt.Problem(5, 48, 32, False, torch.bfloat16)), None)
    x = torch.randn(5, 32)  # CPU fp32: not a problem cuBLASLt runs, so torch's product
    assert cublaslt.Problem.of(x, lin.weight) is None
    assert torch.equal(lin(x), torch.nn.functional.linear(x, lin.weight))
    assert lin(torch.randn(3, 32)).shape == (3, 48)  # no choice for 3 rows at all
