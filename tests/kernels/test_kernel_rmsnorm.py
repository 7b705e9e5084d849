import pytest
import torch
from kernel_testing import DEVICE, DTYPES, assert_close

from kernels.rmsnorm import rms_norm, rms_norm_ref


def _hf_llama_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm, or an independent transcription of it when it cannot be built."""
    try:
        from transformers.models.llama.modeling_llama import LlamaRMSNorm

        norm = LlamaRMSNorm(x.shape[-1], eps=eps).to(device=x.device, dtype=weight.dtype)
        with torch.no_grad():
            norm.weight.copy_(weight)
            return norm(x)
    except ImportError:
        xf = x.float()
        return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_rows, hidden_size", [(1, 64), (7, 100), (33, 576), (3, 4096)])
@pytest.mark.parametrize("with_residual", [False, True])
def test_rms_norm_matches_ref(dtype, num_rows, hidden_size, with_residual, poison_empty):
    # A strided x (row stride > H), as when normalising a slice of a larger buffer.
    x = torch.randn(num_rows, hidden_size + 8, dtype=dtype, device=DEVICE)[:, :hidden_size]
    weight = 1 + 0.1 * torch.randn(hidden_size, dtype=dtype, device=DEVICE)
    residual = torch.randn(num_rows, hidden_size, dtype=dtype, device=DEVICE) if with_residual else None
    x_before = x.clone()

    got = rms_norm(x, weight, 1e-6, residual)
    want = rms_norm_ref(x, weight, 1e-6, residual)
    if with_residual:
        (out, residual_out), (ref_out, ref_residual_out) = got, want
        assert_close(residual_out, ref_residual_out, dtype)
        assert torch.equal(residual_out, x + residual)
    else:
        out, ref_out = got, want
    assert out.dtype == dtype
    assert_close(out, ref_out, dtype)
    assert torch.equal(x, x_before), "x must not be modified"


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_ref_matches_hf(dtype):
    x = torch.randn(5, 192, dtype=dtype, device=DEVICE)
    weight = 1 + 0.1 * torch.randn(192, dtype=dtype, device=DEVICE)
    torch.testing.assert_close(rms_norm_ref(x, weight, 1e-5), _hf_llama_rms_norm(x, weight, 1e-5), rtol=0, atol=0)


def test_rms_norm_rejects_bad_inputs():
    x = torch.randn(4, 64, device=DEVICE)
    with pytest.raises(ValueError, match="weight"):
        rms_norm(x, torch.ones(32, device=DEVICE), 1e-6)
    with pytest.raises(ValueError, match="stride 1"):
        rms_norm(x.t(), torch.ones(4, device=DEVICE), 1e-6)
    with pytest.raises(TypeError, match="residual"):
        rms_norm(x, torch.ones(64, device=DEVICE), 1e-6, x.double())
