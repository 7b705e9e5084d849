"""A Llama-style decoder (Llama 2/3, Mistral, Qwen2, SmolLM2) over a paged KV cache.

The model only computes: where K/V live and how attention reads them is the ForwardContext's business
(passed in by the model runner), so the same module runs eagerly on the CPU and under CUDA graphs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from .. import cublaslt, ops


@dataclass
class ModelArgs:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict | None
    max_position_embeddings: int
    tie_word_embeddings: bool
    qkv_bias: bool
    sliding_window: int | None = None

    @classmethod
    def from_hf_config(cls, cfg: Any) -> "ModelArgs":
        model_type = getattr(cfg, "model_type", "llama")
        if model_type not in ("llama", "mistral", "qwen2"):
            raise ValueError(f"unsupported model family {model_type!r} (llama, mistral, qwen2 are)")
        num_heads = cfg.num_attention_heads
        # transformers 5 keeps rope settings in `rope_parameters`; older releases in rope_theta/rope_scaling.
        rope = dict(getattr(cfg, "rope_parameters", None) or {})
        theta = rope.pop("rope_theta", None) or getattr(cfg, "rope_theta", 10000.0)
        scaling = rope or getattr(cfg, "rope_scaling", None)
        if scaling and scaling.get("rope_type", scaling.get("type")) in (None, "default"):
            scaling = None
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // num_heads
        return cls(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.hidden_size,
            intermediate_size=cfg.intermediate_size,
            num_layers=cfg.num_hidden_layers,
            num_heads=num_heads,
            num_kv_heads=getattr(cfg, "num_key_value_heads", None) or num_heads,
            head_dim=head_dim,
            rms_norm_eps=cfg.rms_norm_eps,
            rope_theta=float(theta),
            rope_scaling=dict(scaling) if scaling else None,
            max_position_embeddings=cfg.max_position_embeddings,
            tie_word_embeddings=bool(getattr(cfg, "tie_word_embeddings", False)),
            qkv_bias=model_type == "qwen2" or bool(getattr(cfg, "attention_bias", False)),
            sliding_window=getattr(cfg, "sliding_window", None) if model_type == "mistral" else None,
        )


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
        self.gate_up_proj = Linear(args.hidden_size, 2 * args.intermediate_size, bias=False)
        self.down_proj = Linear(args.intermediate_size, args.hidden_size, bias=False)

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
        attn = ctx.attention(self.layer_idx, q, k, v, positions)  # [N, Hq, D]
        h = self.o_proj(attn.reshape(n, -1))
        x, residual = self.post_attention_layernorm(h, residual)
        return self.down_proj(ops.silu_and_mul(self.gate_up_proj(x))), residual


class LlamaForCausalLM(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(args, i) for i in range(args.num_layers))
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
