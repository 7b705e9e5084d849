"""Model families: one Llama-style decoder (llama.py) serves Llama, Mistral and Qwen2; Qwen3 (qwen3.py),
Qwen3-MoE (qwen3_moe.py), EXAONE 4.0 (exaone4.py) and Gemma 3 (gemma3.py) override the parts they
change. `build_model` picks the class for ModelArgs.family."""
from torch import nn

from .args import FAMILIES, ModelArgs, check_model_type, supported_families
from .exaone4 import Exaone4ForCausalLM
from .gemma3 import Gemma3ForCausalLM
from .llama import LlamaForCausalLM
from .qwen3 import Qwen3ForCausalLM
from .qwen3_moe import Qwen3MoeForCausalLM

_CLASSES = {"llama": LlamaForCausalLM, "mistral": LlamaForCausalLM, "qwen2": LlamaForCausalLM,
            "qwen3": Qwen3ForCausalLM, "qwen3_moe": Qwen3MoeForCausalLM, "exaone4": Exaone4ForCausalLM,
            "gemma3_text": Gemma3ForCausalLM}


def build_model(args: ModelArgs) -> nn.Module:
    """The decoder for args.family, with uninitialised weights (on the current default device)."""
    check_model_type(args.family, "ModelArgs.family")
    return _CLASSES[args.family](args)


__all__ = ["FAMILIES", "Exaone4ForCausalLM", "Gemma3ForCausalLM", "LlamaForCausalLM", "ModelArgs", "Qwen3ForCausalLM",
           "Qwen3MoeForCausalLM", "build_model", "check_model_type", "supported_families"]
