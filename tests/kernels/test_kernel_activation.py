import pytest
import torch
import torch.nn.functional as F
from kernel_testing import DEVICE, DTYPES

from kernels.activation import silu_and_mul, silu_and_mul_ref


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_rows, width", [(1, 64), (5, 100), (33, 1536), (2, 3000)])
def test_silu_and_mul_matches_unfused_torch(dtype, num_rows, width):
    # A row stride wider than the row, as for a slice of a larger buffer.
    x = (3 * torch.randn(num_rows, 2 * width + 6, dtype=dtype, device=DEVICE))[:, :2 * width]
    got = silu_and_mul(x)
    gate, up = x[:, :width], x[:, width:]
    want = F.silu(gate) * up
    assert got.shape == (num_rows, width) and got.dtype == dtype
    # Same rounding steps as the unfused ops: equal but for the odd last-bit difference of exp.
    torch.testing.assert_close(got, want, rtol=1e-6 if dtype == torch.float32 else 8e-3, atol=1e-6)
    torch.testing.assert_close(silu_and_mul_ref(x), want, rtol=0, atol=0)


def test_silu_and_mul_large_negative_gate_is_zero_not_nan():
    x = torch.tensor([[-1000.0, 0.0, 1000.0, 2.0, 2.0, 2.0]], device=DEVICE)
    out = silu_and_mul(x)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.tensor([[0.0, 0.0, 2000.0]], device=DEVICE))


def test_silu_and_mul_rejects_bad_inputs():
    with pytest.raises(ValueError, match="even"):
        silu_and_mul(torch.randn(2, 7, device=DEVICE))
    with pytest.raises(ValueError, match="stride 1"):
        silu_and_mul(torch.randn(8, 4, device=DEVICE).t())
    with pytest.raises(TypeError, match="dtype"):
        silu_and_mul(torch.randn(2, 8, device=DEVICE).double())
