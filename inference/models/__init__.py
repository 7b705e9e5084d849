"""Model families: one Llama-style decoder (llama.py) serves Llama, Mistral and Qwen2; Qwen3 (qwen3.py) and
Qwen3-MoE (qwen3_moe.py) override the parts they change. `build_model` picks the class for ModelArgs.family."""
from torch import nn

from .args import FAMILIES, ModelArgs, check_model_type, supported_families
from .llama import LlamaForCausalLM
from .qwen3 import Qwen3ForCausalLM
from .qwen3_moe import Qwen3MoeForCausalLM

_CLASSES = {"llama": LlamaForCausalLM, "mistral": LlamaForCausalLM, "qwen2": LlamaForCausalLM,
            "qwen3": Qwen3ForCausalLM, "qwen3_moe": Qwen3MoeForCausalLM}


def build_model(args: ModelArgs) -> nn.Module:
    """The decoder for args.family, with uninitialised weights (on the current default device)."""
    check_model_type(args.family, "ModelArgs.family")
    return _CLASSES[args.family](args)


__all__ = ["FAMILIES", "LlamaForCausalLM", "ModelArgs", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "build_model", "check_model_type",
           "supported_families"]
