"""Qwen3-MoE: Qwen3's attention, and in the layers listed in ModelArgs.moe_layers a mixture of
experts instead of the dense MLP. A linear router scores every expert, softmax in fp32, the top k
are kept and (norm_topk_prob) renormalised to sum to 1; the experts run as one fused grouped GEMM
(kernels/fused_moe.py) over only the experts some token was routed to."""
from __future__ import annotations

import torch
from torch import nn

from .. import ops
from .args import ModelArgs
from .llama import Linear, LlamaForCausalLM
from .qwen3 import Qwen3DecoderLayer


class Qwen3MoeDecoderLayer(Qwen3DecoderLayer):
    def init_mlp(self, args: ModelArgs) -> None:
        self.is_moe = self.layer_idx in args.moe_layers
        if not self.is_moe:
            return super().init_mlp(args)
        e, h, i = args.num_experts, args.hidden_size, args.moe_intermediate_size
        self.top_k, self.norm_topk_prob = args.num_experts_per_tok, args.norm_topk_prob
        self.router = Linear(h, e, bias=False)
        self.experts_gate_up = nn.Parameter(torch.empty(e, 2 * i, h))  # [E, 2I, H]: gate rows | up rows
        self.experts_down = nn.Parameter(torch.empty(e, h, i))  # [E, H, I]

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        if not self.is_moe:
            return super().mlp(x)
        probs = torch.softmax(self.router(x), dim=-1, dtype=torch.float32)  # [N, E]
        weights, expert_ids = torch.topk(probs, self.top_k, dim=-1)  # [N, K]
        if self.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return ops.fused_moe(x, self.experts_gate_up, self.experts_down, weights.to(x.dtype), expert_ids)


class Qwen3MoeForCausalLM(LlamaForCausalLM):
    layer_cls = Qwen3MoeDecoderLayer
