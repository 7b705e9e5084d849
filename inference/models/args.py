"""ModelArgs: the shape of a supported model, read from a Hugging Face config, and the families we run.

Only the families listed in FAMILIES load: each runs our own torch code (inference/models/), never a
model folder's Python, so a folder of another family is refused here with what is supported.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidRequestError

# Hugging Face model_type -> what it covers (the error message and docs/MODELS.md name these).
FAMILIES = {
    "llama": "Llama 2/3, SmolLM2",
    "mistral": "Mistral",
    "qwen2": "Qwen2, Qwen2.5",
    "qwen3": "Qwen3 dense",
    "qwen3_moe": "Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B)",
    "exaone4": "EXAONE 4.0",
    "gemma3_text": "Gemma 3 text",
}


def supported_families() -> str:
    """One line naming every supported model_type and what it covers."""
    return "; ".join(f"{t} ({what})" for t, what in FAMILIES.items())


def check_model_type(model_type: str | None, where: str = "config.json") -> None:
    """Raise InvalidRequestError unless `model_type` is a family Pagoda runs."""
    if model_type not in FAMILIES:
        raise InvalidRequestError(
            f"unsupported model architecture {model_type!r} in {where}: Pagoda runs its own code for "
            f"these model_type values only: {supported_families()}", field="model")


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
    family: str = "llama"  # a FAMILIES key: which decoder runs (inference.models.build_model)
    qk_norm: bool = False  # Qwen3: a per-head RMSNorm on q and k before RoPE
    # Mixture of experts (qwen3_moe); num_experts 0 = every layer has a dense MLP.
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    norm_topk_prob: bool = True  # renormalise the top-k routing weights to sum to 1
    moe_layers: tuple[int, ...] = field(default=())  # the layers whose MLP is the experts
    nope_layers: tuple[int, ...] = field(default=())  # layers without RoPE (EXAONE 4.0's global ones)
    # The layers that attend over sliding_window keys (every layer of Mistral, some of EXAONE 4.0 and
    # Gemma 3); the others are global.
    sliding_layers: tuple[int, ...] = field(default=())
    # Gemma 3: its sliding layers rotate by their own base; attention scaled by query_pre_attn_scalar ** -0.5.
    local_rope_theta: float | None = None
    query_pre_attn_scalar: float | None = None

    def layer_windows(self) -> list[int | None]:
        """Each layer's sliding window, as Hugging Face's `sliding_window`: the query at position p sees
        keys p - window + 1 .. p (window keys, itself included); None: every key up to p."""
        sliding = set(self.sliding_layers) if self.sliding_window else set()
        return [self.sliding_window if i in sliding else None for i in range(self.num_layers)]

    @classmethod
    def from_hf_config(cls, cfg: Any) -> "ModelArgs":
        model_type = getattr(cfg, "model_type", "llama")
        check_model_type(model_type)
        num_heads = cfg.num_attention_heads
        # transformers 5 keeps rope settings in `rope_parameters`; older releases in rope_theta/rope_scaling.
        rope = dict(getattr(cfg, "rope_parameters", None) or {})
        theta = rope.pop("rope_theta", None) or getattr(cfg, "rope_theta", 10000.0)
        scaling = rope or getattr(cfg, "rope_scaling", None)
        if scaling and scaling.get("rope_type", scaling.get("type")) in (None, "default"):
            scaling = None
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // num_heads
        window = _sliding_window(cfg, model_type)
        moe = _moe_fields(cfg) if model_type == "qwen3_moe" else {}
        gemma = _gemma3_fields(cfg) if model_type == "gemma3_text" else {}
        if gemma:
            theta, scaling = gemma.pop("rope_theta"), gemma.pop("rope_scaling")
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
            sliding_window=window,
            family=model_type,
            qk_norm=model_type in ("qwen3", "qwen3_moe", "exaone4"),
            nope_layers=_nope_layers(cfg) if model_type == "exaone4" else (),
            sliding_layers=_sliding_layers(cfg, model_type) if window else (),
            **moe, **gemma,
        )


def _nope_layers(cfg: Any) -> tuple[int, ...]:
    """EXAONE 4.0 with a sliding window: its global ("full_attention") layers use no RoPE."""
    if not getattr(cfg, "sliding_window", None):
        return ()
    return tuple(i for i, t in enumerate(getattr(cfg, "layer_types", None) or []) if t == "full_attention")


def _sliding_layers(cfg: Any, model_type: str) -> tuple[int, ...]:
    """Mistral slides in every layer; EXAONE 4.0 and Gemma 3 where layer_types says "sliding_attention"."""
    if model_type == "mistral":
        return tuple(range(cfg.num_hidden_layers))
    return tuple(i for i, t in enumerate(getattr(cfg, "layer_types", None) or []) if t == "sliding_attention")


def _sliding_window(cfg: Any, model_type: str) -> int | None:
    """The attention window, on every layer (Mistral) or on some (EXAONE 4.0, Gemma 3); Qwen3's
    use_sliding_window, which the released checkpoints leave off, is refused."""
    if model_type in ("mistral", "exaone4", "gemma3_text"):
        return getattr(cfg, "sliding_window", None)
    if model_type in ("qwen3", "qwen3_moe") and getattr(cfg, "use_sliding_window", False):
        raise InvalidRequestError(
            f"{model_type} with use_sliding_window=true is not supported (the released Qwen3 checkpoints "
            "attend globally; set use_sliding_window to false in config.json)", field="model")
    return None


def _moe_fields(cfg: Any) -> dict:
    """Qwen3-MoE: which layers route to experts (HF's rule: every decoder_sparse_step-th layer, but
    the mlp_only_layers), and the routing shape."""
    step = getattr(cfg, "decoder_sparse_step", 1) or 1
    dense = set(getattr(cfg, "mlp_only_layers", None) or [])
    layers = tuple(i for i in range(cfg.num_hidden_layers) if i not in dense and (i + 1) % step == 0)
    return dict(num_experts=cfg.num_experts, num_experts_per_tok=cfg.num_experts_per_tok,
                moe_intermediate_size=cfg.moe_intermediate_size,
                norm_topk_prob=bool(getattr(cfg, "norm_topk_prob", True)),
                moe_layers=layers if cfg.num_experts > 0 else ())


def _gemma3_fields(cfg: Any) -> dict:
    """Gemma 3's per-layer-type RoPE (the global one goes to rope_theta / rope_scaling) and scaling."""
    for name in ("attn_logit_softcapping", "final_logit_softcapping", "use_bidirectional_attention"):
        if getattr(cfg, name, None):
            raise InvalidRequestError(f"gemma3_text with {name} set is not supported", field="model")
    if getattr(cfg, "hidden_activation", "gelu_pytorch_tanh") != "gelu_pytorch_tanh":
        raise InvalidRequestError(f"gemma3_text with hidden_activation {cfg.hidden_activation!r} is not "
                                  "supported (gelu_pytorch_tanh is)", field="model")
    rope = cfg.rope_parameters
    local = dict(rope["sliding_attention"])
    if local.get("rope_type", "default") != "default":
        raise InvalidRequestError("gemma3_text with scaled RoPE in its sliding layers is not supported", field="model")
    full = dict(rope["full_attention"])
    theta = full.pop("rope_theta")
    scaling = full if full.get("rope_type", "default") != "default" else None
    return dict(rope_theta=float(theta), rope_scaling=scaling, local_rope_theta=float(local["rope_theta"]),
                query_pre_attn_scalar=float(cfg.query_pre_attn_scalar))
