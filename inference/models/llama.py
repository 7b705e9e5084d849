"""A Llama-style decoder (Llama 2/3, Mistral, Qwen2, SmolLM2) over a paged KV cache; the other
families (qwen3.py, qwen3_moe.py) are this decoder with the parts they change overridden.

The model only computes: where K/V live and how attention reads them is the ForwardContext's business
(passed in by the model runner), so the same module runs eagerly on the CPU and under CUDA graphs.
"""
from __future__ import annotations

from typing import Protocol

import torch
from torch import nn

from .. import cublaslt, ops
from .args import ModelArgs


class ForwardContext(Protocol):
    """What a forward pass needs besides its inputs (built by the model runner for each step)."""

    cos_sin_cache: torch.Tensor  # [max_pos, head_dim] fp32: cos | sin

    def attention(self, layer_idx: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  positions: torch.Tensor) -> torch.Tensor:
        """Rotate q [N, Hq, D] and k [N, Hkv, D] by positions [N], write this step's k, v into the cache,
        attend q; returns [N, Hq, D]. (Rotary lives here so that it fuses with the cache write.)"""


class Linear(nn.Linear):
    """nn.Linear that runs the GEMM algorithm chosen for it by timing (inference/gemm_tuner.py) at the
    row counts it was tuned for, and torch's F.linear at any other."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tuned: dict[int, tuple[cublaslt.Plan, object]] = {}  # rows -> (plan, cuBLASLt algorithm)
        self.packed: torch.Tensor | None = None  # CPU: the weight in oneDNN's layout (see pack)

    def pack(self) -> None:
        """Run on the CPU from a oneDNN-packed copy of the weight (inference/ops.py, pack_linear_weight);
        the plain weight is dropped to the meta device, so the model's memory does not double."""
        self.packed = ops.pack_linear_weight(self.weight)
        self.weight = nn.Parameter(self.weight.detach().to("meta"), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None:
            return ops.linear_packed(x, self.packed, self.bias)
        choice = self.tuned.get(x.shape[0]) if self.tuned else None
        if choice is not None:
            plan, algo = choice
            if cublaslt.Problem.of(x, self.weight) == plan.problem:
                return plan.run(x, self.weight, algo)
        return nn.functional.linear(x, self.weight, self.bias)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        return ops.rms_norm(x, self.weight, self.eps, residual)


class DecoderLayer(nn.Module):
    def __init__(self, args: ModelArgs, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads, self.num_kv_heads, self.head_dim = args.num_heads, args.num_kv_heads, args.head_dim
        q_size, kv_size = args.num_heads * args.head_dim, args.num_kv_heads * args.head_dim
        self.qkv_split = [q_size, kv_size, kv_size]
        self.input_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.qkv_proj = Linear(args.hidden_size, q_size + 2 * kv_size, bias=args.qkv_bias)
        self.o_proj = Linear(q_size, args.hidden_size, bias=False)
        self.post_attention_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.init_mlp(args)

    def init_mlp(self, args: ModelArgs) -> None:
        self.gate_up_proj = Linear(args.hidden_size, 2 * args.intermediate_size, bias=False)
        self.down_proj = Linear(args.intermediate_size, args.hidden_size, bias=False)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        """x [N, H] (normed) -> [N, H]."""
        return self.down_proj(ops.silu_and_mul(self.gate_up_proj(x)))

    def norm_qk(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """q [N, Hq, D], k [N, Hkv, D] before RoPE: unchanged in Llama (Qwen3 norms each head)."""
        return q, k

    def forward(self, h: torch.Tensor, residual: torch.Tensor | None, positions: torch.Tensor,
                ctx: ForwardContext) -> tuple[torch.Tensor, torch.Tensor]:
        if residual is None:
            residual = h
            x = self.input_layernorm(h)
        else:
            x, residual = self.input_layernorm(h, residual)
        n = x.shape[0]
        q, k, v = self.qkv_proj(x).split(self.qkv_split, dim=-1)
        q = q.reshape(n, self.num_heads, self.head_dim)  # [N, Hq, D]
        k = k.reshape(n, self.num_kv_heads, self.head_dim)  # [N, Hkv, D]
        v = v.reshape(n, self.num_kv_heads, self.head_dim)
        q, k = self.norm_qk(q, k)
        attn = ctx.attention(self.layer_idx, q, k, v, positions)  # [N, Hq, D]
        h = self.o_proj(attn.reshape(n, -1))
        x, residual = self.post_attention_layernorm(h, residual)
        return self.mlp(x), residual


class LlamaForCausalLM(nn.Module):
    layer_cls: type[DecoderLayer] = DecoderLayer  # a family subclass names its own layer

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = nn.ModuleList(self.layer_cls(args, i) for i in range(args.num_layers))
        self.norm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.lm_head = None if args.tie_word_embeddings else Linear(args.hidden_size, args.vocab_size,
                                                                    bias=False)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx: ForwardContext) -> torch.Tensor:
        """input_ids, positions [N] (the tokens of every scheduled sequence, packed) -> hidden [N, H]."""
        h = self.embed_tokens(input_ids)
        residual = None
        for layer in self.layers:
            h, residual = layer(h, residual, positions, ctx)
        h, _ = self.norm(h, residual)
        return h

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.lm_head is None:
            return torch.nn.functional.linear(hidden, self.embed_tokens.weight)
        return self.lm_head(hidden)
