"""Programmatic dependent launch: when it is used, and that results do not depend on it."""
import pytest
import torch

import kernels
from kernels import _pdl


def test_pdl_is_off_on_cpu_in_the_interpreter_and_when_switched_off(monkeypatch):
    assert not _pdl.enabled(torch.device("cpu"))
    if torch.cuda.is_available():
        major = torch.cuda.get_device_capability()[0]
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        monkeypatch.delenv("PAGODA_PDL", raising=False)
        assert _pdl.enabled(torch.device("cuda")) == (major >= 9)
        monkeypatch.setenv("PAGODA_PDL", "0")
        assert not _pdl.enabled(torch.device("cuda"))
        monkeypatch.setenv("PAGODA_PDL", "1")
        monkeypatch.setenv("TRITON_INTERPRET", "1")
        assert not _pdl.enabled(torch.device("cuda"))


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9,
                    reason="PDL needs an sm_90+ GPU")
def test_a_chain_of_pdl_kernels_in_a_cuda_graph_matches_the_same_chain_without_pdl(monkeypatch):
    """rmsnorm -> GEMM -> silu -> rmsnorm, each consuming the last one's output, replayed as a graph:
    every PDL kernel waits for the one before it, so the results equal the plain launches' bit for bit."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    torch.manual_seed(0)
    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    w_norm = torch.rand(4096, device="cuda", dtype=torch.bfloat16) + 0.5
    w_up = torch.randn(2 * 1024, 4096, device="cuda", dtype=torch.bfloat16) * 0.02

    def chain():
        h = kernels.rms_norm(x, w_norm, 1e-5)
        h = kernels.silu_and_mul(torch.nn.functional.linear(h, w_up))
        return kernels.rms_norm(h, w_norm[:1024], 1e-5, h)[0]

    results = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("PAGODA_PDL", flag)
        chain()  # compile outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = chain()
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
        results[flag] = out.clone()
    assert torch.equal(results["0"], results["1"])
    assert torch.equal(results["1"], chain())
