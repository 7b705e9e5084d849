"""Writes tiny FP8 checkpoints (and their dequantized twins) from a small random model, for the FP8 tests."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from inference.quantization.fp8 import FP8_DTYPE, FP8_MAX, quantize_per_channel

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def is_projection(name: str) -> bool:
    return name.endswith(".weight") and any(f".{p}." in name for p in PROJECTIONS)


def quantize_blocks(w: torch.Tensor, block: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """w [out, in] -> (e4m3 [out, in], scale [ceil(out/bo), ceil(in/bi)]): one scale per block."""
    bo, bi = block
    out, inp = w.shape
    rows, cols = -(-out // bo), -(-inp // bi)
    scale = torch.empty(rows, cols)
    for r in range(rows):
        for c in range(cols):
            scale[r, c] = w[r * bo:(r + 1) * bo, c * bi:(c + 1) * bi].abs().amax() / FP8_MAX
    full = scale.repeat_interleave(bo, 0)[:out].repeat_interleave(bi, 1)[:, :inp]
    return (w / full).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE), scale


def dequantize(q: torch.Tensor, scale: torch.Tensor, block: tuple[int, int] | None) -> torch.Tensor:
    out, inp = q.shape
    if block is not None:
        scale = scale.repeat_interleave(block[0], 0)[:out].repeat_interleave(block[1], 1)[:, :inp]
        return q.float() * scale
    return q.float() * (scale.reshape(-1, 1) if scale.numel() > 1 else scale.reshape(()))


def quantize(w: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor, tuple[int, int] | None]:
    """One weight in `layout`: "channel", "tensor" (compressed-tensors) or "block" (128 x 128)."""
    if layout == "block":
        q, s = quantize_blocks(w, (128, 128))
        return q, s, (128, 128)
    if layout == "channel":
        q, s = quantize_per_channel(w)
        return q, s[:, None], None
    s = (w.abs().amax() / FP8_MAX).reshape(1)
    return (w / s).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE), s, None


def quantization_config(layout: str) -> dict:
    if layout == "block":
        return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                "weight_block_size": [128, 128]}
    return {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 8, "type": "float", "strategy": layout, "symmetric": True, "dynamic": False},
                "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}}}}


def write_fp8_pair(source: Path, fp8_dir: Path, plain_dir: Path, layout: str) -> tuple[Path, Path]:
    """From the float checkpoint `source`: an FP8 checkpoint of `layout` in fp8_dir, and the same weights
    dequantized (what the FP8 checkpoint means) as a plain checkpoint in plain_dir."""
    state = load_file(str(source / "model.safetensors"))
    fp8_state, plain_state = {}, {}
    for name, w in state.items():
        if is_projection(name):
            q, s, block = quantize(w.float(), layout)
            suffix = "_scale_inv" if layout == "block" else "_scale"
            fp8_state[name], fp8_state[name + suffix] = q, s
            if layout != "block":  # llm-compressor also writes a static activation scale; unused here
                fp8_state[name.removesuffix(".weight") + ".input_scale"] = torch.ones(1)
            plain_state[name] = dequantize(q, s, block)
        else:
            fp8_state[name] = plain_state[name] = w
    for folder, tensors, qcfg in ((fp8_dir, fp8_state, quantization_config(layout)), (plain_dir, plain_state, None)):
        shutil.copytree(source, folder, ignore=shutil.ignore_patterns("*.safetensors"))
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / "model.safetensors"))
        if qcfg is not None:
            config = json.loads((folder / "config.json").read_text())
            config["quantization_config"] = qcfg
            (folder / "config.json").write_text(json.dumps(config))
    return fp8_dir, plain_dir


def rewrite(folder: Path, edit) -> None:
    """Apply edit(state dict) to a checkpoint's tensors in place (to make bad checkpoints)."""
    state = load_file(str(folder / "model.safetensors"))
    edit(state)
    save_file(state, str(folder / "model.safetensors"))
