"""FP8 checkpoints as people download them, read dequantized.

Two layouts, told apart by config.json's `quantization_config.quant_method`:
- "compressed-tensors" (llm-compressor): `<proj>.weight` e4m3 with `<proj>.weight_scale`, one scale per
  tensor ([] or [1]) or per output channel ([out, 1]); `<proj>.input_scale` (static activation scale)
  is not needed, activations are scaled per token at run time.
- "fp8" (Qwen3 / DeepSeek FP8 releases): `<proj>.weight` e4m3 with `<proj>.weight_scale_inv`
  [ceil(out / bo), ceil(in / bi)], one scale per bo x bi block (`weight_block_size`, 128 x 128); without
  `weight_block_size`, `<proj>.weight_scale` per tensor.
In both, weight ~= e4m3 * scale. `dequantize_checkpoint` turns the (name, tensor) stream of such a
folder into the plain Hugging Face names and full-precision tensors the loader copies; anything that
does not fit (a missing or extra scale, a wrong shape, a scale that is not finite and positive) is
refused with an InvalidRequestError naming the tensor.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import torch

from ..errors import InvalidRequestError
from .fp8 import FP8_DTYPE

SUPPORTED_CHECKPOINT_METHODS = ("compressed-tensors", "fp8")
_IGNORED_SUFFIXES = (".input_scale", ".weight_zero_point", ".k_scale", ".v_scale")


@dataclass(frozen=True)
class Fp8CheckpointLayout:
    """How a folder's FP8 weights are scaled: `scale_suffix` names the scale tensor of each weight;
    block = (rows, cols) of one scale's block, or None (per tensor or per channel)."""

    method: str
    scale_suffix: str
    block: tuple[int, int] | None


def read_layout(path: Path) -> Fp8CheckpointLayout | None:
    """The FP8 layout of the checkpoint folder `path`, or None for an unquantized one."""
    config = json.loads((path / "config.json").read_text())
    qcfg = config.get("quantization_config")
    if qcfg is None:
        return None
    method = qcfg.get("quant_method")
    if method not in SUPPORTED_CHECKPOINT_METHODS:
        raise InvalidRequestError(
            f"{path}: quantization_config.quant_method {method!r} is not supported; quantized checkpoints load "
            f"from {', '.join(SUPPORTED_CHECKPOINT_METHODS)} (FP8 e4m3 weights)", field="model")
    if method == "compressed-tensors":
        for name, group in (qcfg.get("config_groups") or {}).items():
            weights = group.get("weights") or {}
            if weights.get("type") != "float" or weights.get("num_bits") != 8:
                raise InvalidRequestError(
                    f"{path}: compressed-tensors group {name!r} has {weights.get('num_bits')}-bit "
                    f"{weights.get('type')} weights; only 8-bit float (FP8 e4m3) is supported", field="model")
            if weights.get("strategy") not in ("tensor", "channel"):
                raise InvalidRequestError(
                    f"{path}: compressed-tensors group {name!r} has strategy {weights.get('strategy')!r}; "
                    "tensor and channel are supported", field="model")
        return Fp8CheckpointLayout(method, ".weight_scale", None)
    fmt = qcfg.get("fmt", "e4m3")
    if fmt != "e4m3":
        raise InvalidRequestError(f"{path}: fp8 format {fmt!r} is not supported (e4m3 is)", field="model")
    block = qcfg.get("weight_block_size")
    if block is None:
        return Fp8CheckpointLayout(method, ".weight_scale", None)
    if not (isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block)):
        raise InvalidRequestError(f"{path}: weight_block_size must be two positive integers, got {block!r}",
                                  field="model")
    return Fp8CheckpointLayout(method, ".weight_scale_inv", (block[0], block[1]))


def dequantize(name: str, q: torch.Tensor, scale: torch.Tensor, layout: Fp8CheckpointLayout,
               dtype: torch.dtype) -> torch.Tensor:
    """One FP8 weight [out, in] and its scale -> the weight in `dtype`. Raises InvalidRequestError."""
    if q.dtype != FP8_DTYPE or q.dim() != 2:
        raise InvalidRequestError(f"{name}: an FP8 weight must be a 2-D {FP8_DTYPE}, got {q.dtype} "
                                  f"{tuple(q.shape)}", field="model")
    out, inp = q.shape
    scale = scale.float()
    if layout.block is not None:
        bo, bi = layout.block
        expected = (-(-out // bo), -(-inp // bi))
    elif scale.numel() == 1:
        expected = tuple(scale.shape)  # per tensor: [] or [1]
    else:
        expected = (out, 1)  # per output channel
    if tuple(scale.shape) != expected:
        raise InvalidRequestError(f"{name}{layout.scale_suffix} has shape {tuple(scale.shape)}, expected "
                                  f"{expected} for weight {tuple(q.shape)}", field="model")
    if not bool(torch.isfinite(scale).all()) or not bool((scale > 0).all()):
        raise InvalidRequestError(f"{name}{layout.scale_suffix} must be finite and positive", field="model")
    w = q.float()
    if layout.block is not None:
        bo, bi = layout.block
        full = scale.repeat_interleave(bo, 0)[:out].repeat_interleave(bi, 1)[:, :inp]  # [out, in]
        w = w * full
    else:
        w = w * scale.reshape(-1, 1) if scale.numel() > 1 else w * scale.reshape(())
    return w.to(dtype)


def dequantize_checkpoint(tensors: Iterable[tuple[str, object]], layout: Fp8CheckpointLayout,
                          dtype: torch.dtype) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor or safetensors slice) of an FP8 folder -> (name, tensor) with every FP8 weight
    dequantized to `dtype` and the scales consumed. A weight waits for its scale (and a scale for its
    weight) whatever order the files list them in."""
    weights: dict[str, torch.Tensor] = {}
    scales: dict[str, torch.Tensor] = {}
    for name, t in tensors:
        if name.endswith(_IGNORED_SUFFIXES):
            continue
        tensor = t if isinstance(t, torch.Tensor) else t[:]  # a lazy slice: FP8 weights are read whole
        if name.endswith(layout.scale_suffix):
            base = name[:-len(layout.scale_suffix)] + ".weight"
            if base in weights:
                yield base, dequantize(base, weights.pop(base), tensor, layout, dtype)
            else:
                scales[base] = tensor
        elif tensor.dtype == FP8_DTYPE:
            if name in scales:
                yield name, dequantize(name, tensor, scales.pop(name), layout, dtype)
            else:
                weights[name] = tensor
        elif tensor.dtype.is_floating_point and tensor.element_size() == 1:
            raise InvalidRequestError(f"{name}: {tensor.dtype} weights are not supported (FP8 e4m3 is)",
                                      field="model")
        else:
            yield name, tensor
    if weights:
        raise InvalidRequestError(f"FP8 weight {sorted(weights)[0]} has no {layout.scale_suffix[1:]} "
                                  f"({len(weights)} such weights)", field="model")
    if scales:
        raise InvalidRequestError(f"{sorted(scales)[0][:-len('.weight')]}{layout.scale_suffix} belongs to no "
                                  "FP8 weight", field="model")
