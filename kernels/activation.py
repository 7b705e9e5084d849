"""SiLU-and-multiply, the gated activation of a Llama MLP: out = silu(gate) * up for x = [gate | up].

Fused, it is one pass over the gate_up projection's output instead of two kernels (silu, then the
product) with a round trip through memory between them; in a CUDA graph of a decode or chat-turn step
it is also one node fewer per layer. Rounding follows the unfused torch ops: silu in fp32, rounded to
x's dtype, then the product in fp32, rounded again.
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels._checks import FLOAT_DTYPES, check_device, check_dtype, check_last_dim_contiguous, check_shape


@triton.jit
def _silu_and_mul_kernel(
    x_ptr,  # [N, 2 * I]: gate | up
    out_ptr,  # [N, I]
    width,  # I
    stride_x,
    stride_out,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < width
    gate = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + width + offs, mask=mask, other=0.0).to(tl.float32)
    silu = (gate / (1.0 + tl.exp(-gate))).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * stride_out + offs, (silu * up).to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """x [N, 2 * I] (last dim contiguous) -> silu(x[:, :I]) * x[:, I:], [N, I] in x's dtype."""
    check_dtype("x", x, FLOAT_DTYPES)
    check_shape("x", x, (None, None))
    check_last_dim_contiguous("x", x)
    check_device("x", x, x.device)
    num_rows, double = x.shape
    if double % 2:
        raise ValueError(f"x's last dimension must be even (gate | up), got {double}")
    width = double // 2
    out = torch.empty(num_rows, width, dtype=x.dtype, device=x.device)
    if num_rows == 0 or width == 0:
        return out
    block = min(1024, triton.next_power_of_2(width))
    _silu_and_mul_kernel[(num_rows, triton.cdiv(width, block))](
        x, out, width, x.stride(0), out.stride(0), BLOCK=block, num_warps=4 if block >= 512 else 1,
    )
    return out


def silu_and_mul_ref(x: torch.Tensor) -> torch.Tensor:
    """Pure-torch silu_and_mul (the engine's CPU path)."""
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up
