"""RMSNorm, optionally fused with the residual add that precedes it (Hugging Face Llama semantics).

out = weight * (x / sqrt(mean(x**2) + eps)).to(x.dtype), the normalisation in fp32; with a residual,
residual_out = x + residual (rounded to x's dtype, as the unfused model does) and out is the norm of
residual_out. One program per row; the whole row lives in registers.
"""

import torch
import triton
import triton.language as tl

from kernels._checks import FLOAT_DTYPES, check_device, check_dtype, check_last_dim_contiguous, check_shape


@triton.jit
def _rms_norm_kernel(
    x_ptr,  # [N, H]
    residual_ptr,  # [N, H], read only when HAS_RESIDUAL
    weight_ptr,  # [H]
    out_ptr,  # [N, H]
    residual_out_ptr,  # [N, H], written only when HAS_RESIDUAL
    eps,
    hidden_size,
    stride_x,
    stride_residual,
    stride_out,
    stride_residual_out,
    HAS_RESIDUAL: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_H)
    mask = offs < hidden_size
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0)
    if HAS_RESIDUAL:
        r = tl.load(residual_ptr + row * stride_residual + offs, mask=mask, other=0.0)
        x = (x.to(tl.float32) + r.to(tl.float32)).to(x_ptr.dtype.element_ty)
        tl.store(residual_out_ptr + row * stride_residual_out + offs, x, mask=mask)
    xf = x.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(xf * xf, axis=0) / hidden_size + eps)
    normed = (xf * rstd).to(x_ptr.dtype.element_ty).to(tl.float32)  # HF casts before the weight
    w = tl.load(weight_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out + offs, (normed * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    residual: torch.Tensor | None = None,
    *,
    out: torch.Tensor | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm of x [N, H] (last dim contiguous) with weight [H]; output in x's dtype.

    Returns out, or (out, residual_out) when residual [N, H] (x's dtype) is given, where
    residual_out = x + residual and out = rms_norm(residual_out). Inputs are never modified.
    """
    check_dtype("x", x, FLOAT_DTYPES)
    check_shape("x", x, (None, None))
    check_last_dim_contiguous("x", x)
    num_rows, hidden_size = x.shape
    check_dtype("weight", weight, FLOAT_DTYPES)
    check_shape("weight", weight, (hidden_size,))
    check_last_dim_contiguous("weight", weight)
    tensors = {"x": x, "weight": weight}
    if residual is not None:
        check_dtype("residual", residual, (x.dtype,))
        check_shape("residual", residual, (num_rows, hidden_size))
        check_last_dim_contiguous("residual", residual)
        tensors["residual"] = residual
    if out is not None:
        check_dtype("out", out, (x.dtype,))
        check_shape("out", out, (num_rows, hidden_size))
        check_last_dim_contiguous("out", out)
        tensors["out"] = out
    for name, t in tensors.items():
        check_device(name, t, x.device)

    if out is None:
        out = torch.empty(num_rows, hidden_size, dtype=x.dtype, device=x.device)
    residual_out = torch.empty_like(out) if residual is not None else None
    if num_rows > 0:
        block_h = triton.next_power_of_2(hidden_size)
        _rms_norm_kernel[(num_rows,)](
            x,
            residual if residual is not None else x,
            weight,
            out,
            residual_out if residual_out is not None else out,
            eps,
            hidden_size,
            x.stride(0),
            residual.stride(0) if residual is not None else 0,
            out.stride(0),
            residual_out.stride(0) if residual_out is not None else 0,
            HAS_RESIDUAL=residual is not None,
            BLOCK_H=block_h,
            num_warps=max(1, min(16, block_h // 512)),
        )
    return out if residual is None else (out, residual_out)


def rms_norm_ref(
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    residual: torch.Tensor | None = None,
    *,
    out: torch.Tensor | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Pure-torch rms_norm (same arguments and results)."""
    if residual is not None:
        x = x + residual
    xf = x.float()
    normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    result = (weight.float() * normed.float()).to(x.dtype)
    if out is not None:
        out.copy_(result)
        result = out
    return result if residual is None else (result, x)
