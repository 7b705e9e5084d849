"""Megatron-style sharding of the Llama-style decoder, applied from outside the model (as in gpt-fast).

Each rank builds the model from `shard_args` (1/size of the attention heads, KV heads and MLP width),
so every projection already has its shard's shape:
- qkv_proj, gate_up_proj: column-parallel. Rank r holds query heads [r*Hq/size, (r+1)*Hq/size), the
  KV heads those queries read (GQA groups never straddle ranks), and the matching rows of gate and up,
  so silu(gate) * up stays local. The loader cuts these rows (and the qkv bias) per rank.
- o_proj, down_proj: row-parallel. Rank r holds the input columns of its heads / MLP slice; its output
  is a partial sum, all-reduced in place by a forward hook (`parallelize`).
- embed_tokens, the norms and lm_head: replicated (see docs/TENSOR_PARALLEL.md for why).
With size 1 none of this is applied: the model is the single-GPU one, op for op.
"""
from __future__ import annotations

from dataclasses import replace

from torch import nn

from ..errors import InvalidRequestError
from ..models import ModelArgs
from .group import TPGroup


def check_tensor_parallel(args: ModelArgs, size: int) -> None:
    """Raise InvalidRequestError unless `size` ranks can split this model evenly."""
    if args.num_experts and size > 1:
        raise InvalidRequestError("tensor_parallel_size > 1 is not supported for mixture-of-experts models "
                                  "(their experts are not sharded); run them on one GPU",
                                  field="tensor_parallel_size")
    for name, value in (("num_heads", args.num_heads), ("num_kv_heads", args.num_kv_heads),
                        ("intermediate_size", args.intermediate_size)):
        if value % size:
            raise InvalidRequestError(
                f"tensor_parallel_size {size} must divide the model's {name} ({value})",
                field="tensor_parallel_size")


def shard_args(args: ModelArgs, size: int) -> ModelArgs:
    """The shape of one rank's model: heads, KV heads and MLP width divided by `size`."""
    check_tensor_parallel(args, size)
    return replace(args, num_heads=args.num_heads // size, num_kv_heads=args.num_kv_heads // size,
                   intermediate_size=args.intermediate_size // size)


def parallelize(model: nn.Module, group: TPGroup) -> None:
    """Sum the partial outputs of the row-parallel o_proj and down_proj over the ranks."""
    def all_reduce(module: nn.Module, inputs, output):
        group.all_reduce(output)  # [N, hidden]: every rank gets the same sum, bit for bit
        return output

    for layer in model.layers:
        layer.o_proj.register_forward_hook(all_reduce)
        layer.down_proj.register_forward_hook(all_reduce)
