"""EXAONE 4.0: Qwen3's per-head q/k norms, with the norms after each block instead of before it
(x + norm(attn(x)), then h + norm(mlp(h)): no input norm), and in the hybrid models (sliding_window
set) RoPE only in the sliding-window layers: the global layers attend without positions (NoPE).

The step's context applies each layer's window (ModelArgs.layer_windows): the sliding layers attend
over their last sliding_window keys, the global ones over the whole context.
"""
from __future__ import annotations

import torch

from .args import ModelArgs
from .llama import ForwardContext, LlamaForCausalLM, RMSNorm
from .qwen3 import Qwen3DecoderLayer


class Exaone4DecoderLayer(Qwen3DecoderLayer):
    def __init__(self, args: ModelArgs, layer_idx: int):
        super().__init__(args, layer_idx)
        del self.input_layernorm  # EXAONE 4.0 norms each block's output, not its input
        self.post_feedforward_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.no_rope = layer_idx in args.nope_layers

    def forward(self, h: torch.Tensor, residual: torch.Tensor | None, positions: torch.Tensor,
                ctx: ForwardContext) -> tuple[torch.Tensor, torch.Tensor]:
        x = h if residual is None else h + residual  # the stream: the previous layer's two halves
        n = x.shape[0]
        q, k, v = self.qkv_proj(x).split(self.qkv_split, dim=-1)
        q, k = self.norm_qk(q.reshape(n, self.num_heads, self.head_dim), k.reshape(n, self.num_kv_heads, self.head_dim))
        v = v.reshape(n, self.num_kv_heads, self.head_dim)
        # Position 0 rotates by nothing (cos 1, sin 0): a NoPE layer through the same fused rotary + cache write.
        attn = ctx.attention(self.layer_idx, q, k, v, torch.zeros_like(positions) if self.no_rope else positions)
        x = x + self.post_attention_layernorm(self.o_proj(attn.reshape(n, -1)))
        return self.post_feedforward_layernorm(self.mlp(x)), x


class Exaone4ForCausalLM(LlamaForCausalLM):
    layer_cls = Exaone4DecoderLayer
