"""Qwen3 dense: the Llama decoder with a per-head RMSNorm on q and k before RoPE (q_norm, k_norm,
each one weight of head_dim shared by all heads). Everything else is llama.py's."""
from __future__ import annotations

import torch

from .args import ModelArgs
from .llama import DecoderLayer, LlamaForCausalLM, RMSNorm


class Qwen3DecoderLayer(DecoderLayer):
    def __init__(self, args: ModelArgs, layer_idx: int):
        super().__init__(args, layer_idx)
        self.q_norm = RMSNorm(args.head_dim, args.rms_norm_eps)
        self.k_norm = RMSNorm(args.head_dim, args.rms_norm_eps)

    def norm_qk(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n, d = q.shape[0], self.head_dim
        # Rows of [N * H, D]: the norm kernel takes 2-D input; reshape copies the strided qkv slices.
        q = self.q_norm(q.reshape(-1, d)).view(n, self.num_heads, d)
        k = self.k_norm(k.reshape(-1, d)).view(n, self.num_kv_heads, d)
        return q, k


class Qwen3ForCausalLM(LlamaForCausalLM):
    layer_cls = Qwen3DecoderLayer
