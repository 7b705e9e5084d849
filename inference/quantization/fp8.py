"""FP8 (e4m3) weights made at load time: per-output-channel weight scales, per-token activation scales.

On CUDA a projection runs torch._scaled_mm (cuBLASLt's FP8 GEMM, row-wise scales) on e4m3 activations
and weights; elsewhere it dequantizes the weight and runs an ordinary matmul (the reference path the CPU
tests check). The model code never knows: `quantize_model_fp8` replaces its projections after loading.
"""
from __future__ import annotations

import torch
from torch import nn

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8_DTYPE).max  # 448.0
_MIN_SCALE = 1e-12  # an all-zero row or token still gets a finite, positive scale

# The decoder layers' projections; the embedding and lm_head stay in the model dtype (their error
# lands straight on the logits, and the lm_head is one GEMM of ~2 * num_layers * 4).
PROJECTIONS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")


def quantize_per_channel(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """weight [out, in] (any float dtype) -> (e4m3 weight [out, in], fp32 scale [out]), weight ~= q * scale."""
    w = weight.float()
    scale = (w.abs().amax(dim=1) / FP8_MAX).clamp(min=_MIN_SCALE)  # [out]
    q = (w / scale[:, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)
    return q, scale


def quantize_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [N, K] -> (e4m3 x [N, K], fp32 scale [N, 1]): one scale per row (token), computed at run time."""
    scale = (x.abs().amax(dim=-1, keepdim=True).float() / FP8_MAX).clamp(min=_MIN_SCALE)  # [N, 1]
    return (x.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE), scale


def dequantize_per_channel(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The inverse of quantize_per_channel, in `dtype`."""
    return (q.float() * scale[:, None]).to(dtype)


class Fp8Linear(nn.Module):
    """y = x @ (q * scale)^T + bias, with q an e4m3 [out, in] weight and scale one fp32 per output channel.

    The weight is kept [out, in] row-major, so weight.t() is the column-major [in, out] operand that
    torch._scaled_mm takes as its second argument.
    """

    def __init__(self, weight: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor | None,
                 out_dtype: torch.dtype):
        super().__init__()
        if weight.dtype != FP8_DTYPE or weight.dim() != 2:
            raise ValueError(f"Fp8Linear needs a 2-D {FP8_DTYPE} weight, got {weight.dtype} {tuple(weight.shape)}")
        if weight_scale.shape != (weight.shape[0],):
            raise ValueError(f"weight_scale must have shape ({weight.shape[0]},), got {tuple(weight_scale.shape)}")
        self.register_buffer("weight", weight.contiguous())
        self.register_buffer("weight_scale", weight_scale.float().contiguous())
        self.register_buffer("scale_row", self.weight_scale[None, :].contiguous())  # [1, out] for _scaled_mm
        self.bias = None if bias is None else nn.Parameter(bias.detach().to(out_dtype), requires_grad=False)
        self.out_dtype = out_dtype
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        # cuBLASLt's FP8 GEMMs need sm_89+ (Ada, Hopper) and both sizes a multiple of 16; elsewhere
        # the weight is dequantized (still half the bytes at rest).
        self.use_scaled_mm = (weight.is_cuda and torch.cuda.get_device_capability(weight.device) >= (8, 9)
                              and self.in_features % 16 == 0 and self.out_features % 16 == 0)

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> "Fp8Linear":
        q, scale = quantize_per_channel(linear.weight.detach())
        return cls(q, scale, linear.bias, linear.weight.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [N, in] -> [N, out]
        if self.use_scaled_mm and x.is_cuda:
            return self._scaled_mm(x)
        w = dequantize_per_channel(self.weight, self.weight_scale, x.dtype)
        return nn.functional.linear(x, w, self.bias)

    def _scaled_mm(self, x: torch.Tensor) -> torch.Tensor:
        xq, x_scale = quantize_per_token(x.contiguous())  # the first operand must be row-major
        # Row-wise scales come with bf16 output only; another model dtype gets a cast.
        y = torch._scaled_mm(xq, self.weight.t(), scale_a=x_scale, scale_b=self.scale_row,
                             out_dtype=torch.bfloat16).to(self.out_dtype)
        # The bias is added outside: cuBLASLt takes no bias with row-wise scales.
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, fp8_e4m3, per-channel scales"


def quantize_model_fp8(model: nn.Module) -> int:
    """Replace every decoder projection of `model` (a LlamaForCausalLM, loaded) by an Fp8Linear, freeing
    the full-precision weight. Returns the number of projections replaced."""
    count = 0
    for layer in model.layers:
        for name in PROJECTIONS:
            linear = getattr(layer, name)
            if not isinstance(linear, nn.Linear):
                continue
            with torch.no_grad():
                setattr(layer, name, Fp8Linear.from_linear(linear))
            count += 1
    return count
