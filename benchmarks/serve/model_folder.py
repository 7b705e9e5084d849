"""The model folder the server loads (PAGODA_MODEL): config.json, random safetensors and SmolLM2's
tokenizer files, written once and reused while its shape is the same.

On the GPU it is Llama-3-8B-shaped (benchmarks.gpu.LLAMA3_8B) in bf16, with fewer layers only on a
card too small to hold the weights and a useful KV cache; on the CPU a tiny Llama of the same
vocabulary. The lm_head rows of ids below FIRST_TEXT_ID and of ids the tokenizer does not have
(128,256 rows, 49,152 tokens) are zero: with random weights greedy decoding then always picks a token
that decodes to text, so every step reaches the client as a chunk (a step whose token has no text
sends nothing, and TTFT / ITL would be read late). The matrix product is the full-size one either way.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from benchmarks.gpu import LLAMA3_8B

TINY = dict(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, rms_norm_eps=1e-5,
            rope_theta=10000.0, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
FIRST_TEXT_ID = 100  # SmolLM2's special and byte tokens lie below
MARKER = "servebench-model.json"
SKIP_FILES = {"config.json", "pagoda-converted.json", "generation_config.json", MARKER}


def default_tokenizer_dir() -> Path:
    """SmolLM2's converted folder in the local cache, converted from the installed GGUF when missing."""
    from inference.model_loader import resolve_model_path

    return resolve_model_path("smollm2-135m-instruct")


def shape_for_device(device: str, total_bytes: int | None = None) -> dict:
    """LLAMA3_8B on a card that holds its weights in under half its memory (H100, H200); else fewer
    layers, so that half the card stays for the KV cache. TINY on the CPU."""
    if device == "cpu":
        return dict(TINY)
    shape = dict(LLAMA3_8B)
    if total_bytes:
        h, inter = shape["hidden_size"], shape["intermediate_size"]
        kv = shape["num_key_value_heads"] * h // shape["num_attention_heads"]
        per_layer = 2 * (2 * h * h + 2 * kv * h + 3 * h * inter)  # bf16 bytes
        fixed = 2 * 2 * shape["vocab_size"] * h  # embedding and lm_head
        fit = int((total_bytes / 2 - fixed) // per_layer)
        shape["num_hidden_layers"] = max(1, min(shape["num_hidden_layers"], fit))
    return shape


def _tensors(shape: dict, num_text_tokens: int, gen: torch.Generator, device: str, dtype: torch.dtype):
    """(name, tensor) in Hugging Face Llama naming, one layer at a time, on the CPU."""
    h, inter, vocab = shape["hidden_size"], shape["intermediate_size"], shape["vocab_size"]
    head_dim = h // shape["num_attention_heads"]
    kv = shape["num_key_value_heads"] * head_dim

    def normal(*size):
        return torch.empty(size, dtype=dtype, device=device).normal_(0.0, 0.02, generator=gen).cpu()

    yield "model.embed_tokens.weight", normal(vocab, h)
    for i in range(shape["num_hidden_layers"]):
        p = f"model.layers.{i}."
        yield p + "self_attn.q_proj.weight", normal(h, h)
        yield p + "self_attn.k_proj.weight", normal(kv, h)
        yield p + "self_attn.v_proj.weight", normal(kv, h)
        yield p + "self_attn.o_proj.weight", normal(h, h)
        yield p + "mlp.gate_proj.weight", normal(inter, h)
        yield p + "mlp.up_proj.weight", normal(inter, h)
        yield p + "mlp.down_proj.weight", normal(h, inter)
        yield p + "input_layernorm.weight", torch.ones(h, dtype=dtype)
        yield p + "post_attention_layernorm.weight", torch.ones(h, dtype=dtype)
    yield "model.norm.weight", torch.ones(h, dtype=dtype)
    head = normal(vocab, h)
    head[:FIRST_TEXT_ID] = 0
    head[num_text_tokens:] = 0
    yield "lm_head.weight", head


def write_model_folder(folder: Path, shape: dict, tokenizer_dir: Path, dtype: str = "bfloat16",
                       device: str = "cpu", shard_bytes: int = 2 * 1024**3) -> Path:
    """Write (or reuse) a random-weight model of `shape` in `folder`; returns the folder."""
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    folder = Path(folder)
    marker = {"shape": shape, "dtype": dtype, "version": 1}
    if (folder / MARKER).is_file() and json.loads((folder / MARKER).read_text()) == marker:
        return folder
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for f in Path(tokenizer_dir).iterdir():
        if f.is_file() and f.name not in SKIP_FILES and not f.name.endswith(".safetensors"):
            shutil.copy2(f, folder / f.name)
    num_text_tokens = min(shape["vocab_size"], len(AutoTokenizer.from_pretrained(folder)))
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": dtype,
              "hidden_act": "silu", **shape}
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    gen = torch.Generator(device=device).manual_seed(0)
    shard: dict[str, torch.Tensor] = {}
    num_shards, size = 0, 0
    for name, tensor in _tensors(shape, num_text_tokens, gen, device, getattr(torch, dtype)):
        shard[name] = tensor.contiguous()
        size += tensor.numel() * tensor.element_size()
        if size >= shard_bytes:
            save_file(shard, str(folder / f"model-{num_shards:05d}.safetensors"))
            shard, size, num_shards = {}, 0, num_shards + 1
    if shard:
        save_file(shard, str(folder / f"model-{num_shards:05d}.safetensors"))
    (folder / MARKER).write_text(json.dumps(marker))  # last: a half-written folder is never reused
    return folder
