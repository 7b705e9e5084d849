"""Gemma 3 (text): interleaved sliding-window and global layers with their own RoPE bases, q/k norms,
GeGLU (tanh GELU), norms before and after both blocks, RMSNorm weights stored as w - 1, embeddings
scaled by sqrt(hidden), and attention scaled by query_pre_attn_scalar ** -0.5.

The step's ForwardContext rotates by the global layers' RoPE (the model runner builds it from
ModelArgs.rope_theta); a sliding layer rotates q and k here by its local base and hands the context
position 0, which rotates by nothing. The step's context also applies each layer's window
(ModelArgs.layer_windows), so a sliding layer attends over its last sliding_window keys only.
"""
from __future__ import annotations

import math

import torch

from kernels.rotary import apply_rotary_ref, build_cos_sin_cache

from .. import ops
from .args import ModelArgs
from .llama import DecoderLayer, ForwardContext, Linear, LlamaForCausalLM, RMSNorm


class GemmaRMSNorm(RMSNorm):
    """Gemma keeps w - 1: the scale is 1 + weight."""

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        return ops.rms_norm(x, self.weight + 1, self.eps, residual)


class Gemma3DecoderLayer(DecoderLayer):
    def __init__(self, args: ModelArgs, layer_idx: int, local_cos_sin: torch.Tensor | None = None):
        super().__init__(args, layer_idx)
        h, eps = args.hidden_size, args.rms_norm_eps
        self.input_layernorm = GemmaRMSNorm(h, eps)
        self.post_attention_layernorm = GemmaRMSNorm(h, eps)
        self.pre_feedforward_layernorm = GemmaRMSNorm(h, eps)
        self.post_feedforward_layernorm = GemmaRMSNorm(h, eps)
        self.q_norm = GemmaRMSNorm(args.head_dim, eps)
        self.k_norm = GemmaRMSNorm(args.head_dim, eps)
        # The runner's attention scale is head_dim ** -0.5; Gemma's is query_pre_attn_scalar ** -0.5.
        self.q_scale = math.sqrt(args.head_dim / args.query_pre_attn_scalar) if args.query_pre_attn_scalar else 1.0
        self.local_cos_sin = local_cos_sin if layer_idx in args.sliding_layers else None  # fp32, not a parameter

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(torch.nn.functional.gelu(gate, approximate="tanh") * up)

    def forward(self, h: torch.Tensor, residual: torch.Tensor | None, positions: torch.Tensor,
                ctx: ForwardContext) -> tuple[torch.Tensor, torch.Tensor]:
        if residual is None:
            residual, x = h, self.input_layernorm(h)
        else:
            x, residual = self.input_layernorm(h, residual)
        n, d = x.shape[0], self.head_dim
        q, k, v = self.qkv_proj(x).split(self.qkv_split, dim=-1)
        q = self.q_norm(q.reshape(-1, d)).view(n, self.num_heads, d)
        k = self.k_norm(k.reshape(-1, d)).view(n, self.num_kv_heads, d)
        v = v.reshape(n, self.num_kv_heads, d)
        if self.local_cos_sin is not None:
            q, k = apply_rotary_ref(q, k, positions, self.local_cos_sin)
            positions = torch.zeros_like(positions)
        if self.q_scale != 1.0:
            q = q * self.q_scale
        attn = ctx.attention(self.layer_idx, q, k, v, positions)
        a = self.post_attention_layernorm(self.o_proj(attn.reshape(n, -1)))
        x, residual = self.pre_feedforward_layernorm(a, residual)
        return self.post_feedforward_layernorm(self.mlp(x)), residual


class Gemma3ForCausalLM(LlamaForCausalLM):
    def __init__(self, args: ModelArgs):
        torch.nn.Module.__init__(self)
        self.args = args
        self.embed_tokens = torch.nn.Embedding(args.vocab_size, args.hidden_size)
        # Built where the model is (the runner's device context); a plain attribute, so .to(dtype) keeps fp32.
        # A sliding layer rotates by absolute positions, so its table covers the whole context.
        local = build_cos_sin_cache(args.head_dim, args.max_position_embeddings, args.local_rope_theta, None).to(
            self.embed_tokens.weight.device)
        self.layers = torch.nn.ModuleList(Gemma3DecoderLayer(args, i, local) for i in range(args.num_layers))
        self.norm = GemmaRMSNorm(args.hidden_size, args.rms_norm_eps)
        self.lm_head = None if args.tie_word_embeddings else Linear(args.hidden_size, args.vocab_size, bias=False)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx: ForwardContext) -> torch.Tensor:
        h = self.embed_tokens(input_ids)
        h = h * torch.tensor(self.args.hidden_size ** 0.5, dtype=h.dtype)  # rounded to h's dtype first, as HF
        residual = None
        for layer in self.layers:
            h, residual = layer(h, residual, positions, ctx)
        h, _ = self.norm(h, residual)
        return h
