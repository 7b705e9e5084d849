"""Model families. One Llama-style decoder serves Llama, Mistral and Qwen2."""
from .llama import LlamaForCausalLM, ModelArgs

__all__ = ["LlamaForCausalLM", "ModelArgs"]
