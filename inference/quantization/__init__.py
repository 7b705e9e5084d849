"""Quantization: transforms applied to a loaded model from outside the model code (gpt-fast style).

`quantization="fp8"` (EngineConfig / LLM) swaps every decoder projection for an Fp8Linear (fp8.py);
FP8 checkpoints of the compressed-tensors and block-wise layouts are read by checkpoints.py.
"""
from .fp8 import FP8_DTYPE, Fp8Linear, quantize_model_fp8, quantize_per_channel

SUPPORTED_QUANTIZATION = ("fp8",)
SUPPORTED_KV_CACHE_DTYPES = ("auto", "fp8")

__all__ = ["FP8_DTYPE", "Fp8Linear", "SUPPORTED_KV_CACHE_DTYPES", "SUPPORTED_QUANTIZATION",
           "quantize_model_fp8", "quantize_per_channel"]
