"""EngineConfig: the one validated configuration of the engine, passed to its coordinators."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidRequestError

DEFAULT_MODEL = "smollm2-135m-instruct"


@dataclass
class EngineConfig:
    """Everything the engine needs to start.

    model: a built-in name ("smollm2-135m-instruct") or a Hugging Face folder (config.json + *.safetensors).
    device: "auto" (CUDA if present, else CPU), "cpu" or "cuda".
    dtype: "auto" (bfloat16 on CUDA, float32 on CPU), "float32", "bfloat16" or "float16".
    block_size: tokens per KV-cache block.
    num_kv_blocks: fixes the pool size; otherwise it is sized from cpu_kv_cache_bytes on CPU,
        or gpu_memory_utilization of the device memory on CUDA.
    max_num_seqs / max_num_batched_tokens: per-step caps on sequences and on tokens (chunked prefill).
    max_model_len: context length; defaults to the model's.
    max_pinned_fraction: share of the pool that pinned prefixes may hold.
    tenant_max_blocks_fraction: share of the pool one tenant's requests may hold (None: no cap).
    max_num_waiting: requests queued beyond this are refused at once (backpressure).
    enforce_eager: no CUDA graphs.
    prefill_graphs: on CUDA, also capture single-sequence prefills of up to 128 new tokens (a chat
        turn after a cached prefix) as CUDA graphs.
    tune_gemms: on CUDA with graphs, time cuBLASLt's candidate algorithms for every projection at
        every captured row count before capture, and keep the fastest (inference/gemm_tuner.py).
    async_scheduling: on CUDA, overlap the host's work on decode step N+1 with the GPU's on step N
        (inference/async_scheduling.py; greedy decode batches only; one rank only: with
        tensor_parallel_size > 1 it is not used).
        Both were checked against the eager engine on the H200 (fp32: identical greedy tokens,
        `python -m benchmarks --gpu --only equality --equality`).
    tensor_parallel_size: split the model over this many processes of one host (one GPU each, NCCL; on
        CPU, gloo), Megatron-style; it must divide the model's attention heads, KV heads and MLP width
        (checked when the model is known). See docs/TENSOR_PARALLEL.md.
    quantization: None (the checkpoint's dtype) or "fp8": e4m3 decoder projections with per-output-channel
        scales, made at load time (inference/quantization/fp8.py); on CUDA they run FP8 GEMMs.
        FP8 checkpoints (compressed-tensors, block-wise) load whatever this says: dequantized, and
        re-quantized per channel when it is "fp8". See docs/MODELS.md, "FP8".
    kv_cache_dtype: "auto" (the model dtype) or "fp8" (e4m3 with one scale per layer for K and one for
        V: about twice the blocks in the same memory). "fp8_e4m3" is taken as "fp8".
    """

    model: str = DEFAULT_MODEL
    device: str = "auto"
    dtype: str = "auto"
    block_size: int = 16
    num_kv_blocks: int | None = None
    cpu_kv_cache_bytes: int = 512 * 1024**2
    gpu_memory_utilization: float = 0.90
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    max_model_len: int | None = None
    enable_prefix_caching: bool = True
    max_pinned_fraction: float = 0.20
    tenant_max_blocks_fraction: float | None = None
    max_num_waiting: int = 4096
    enforce_eager: bool = False
    async_scheduling: bool = True
    prefill_graphs: bool = True
    tune_gemms: bool = True
    tensor_parallel_size: int = 1
    seed: int = 0
    quantization: str | None = None
    kv_cache_dtype: str = "auto"

    def __post_init__(self) -> None:
        checks = [
            ("device", self.device in ("auto", "cpu", "cuda"), "one of auto, cpu, cuda"),
            ("dtype", self.dtype in ("auto", "float32", "bfloat16", "float16"),
             "one of auto, float32, bfloat16, float16"),
            ("block_size", self.block_size in (8, 16, 32, 64, 128), "a power of two in [8, 128]"),
            ("num_kv_blocks", self.num_kv_blocks is None or self.num_kv_blocks >= 2, ">= 2"),
            ("gpu_memory_utilization", 0 < self.gpu_memory_utilization <= 1, "in (0, 1]"),
            ("max_num_seqs", self.max_num_seqs >= 1, ">= 1"),
            ("max_num_batched_tokens", self.max_num_batched_tokens >= self.block_size,
             ">= block_size"),
            ("max_pinned_fraction", 0 <= self.max_pinned_fraction <= 1, "in [0, 1]"),
            ("tenant_max_blocks_fraction",
             self.tenant_max_blocks_fraction is None or 0 < self.tenant_max_blocks_fraction <= 1,
             "in (0, 1] or None"),
            ("max_num_waiting", self.max_num_waiting >= 1, ">= 1"),
            ("tensor_parallel_size",
             isinstance(self.tensor_parallel_size, int) and self.tensor_parallel_size >= 1, "an integer >= 1"),
        ]
        from .quantization import SUPPORTED_KV_CACHE_DTYPES, SUPPORTED_QUANTIZATION

        if self.kv_cache_dtype == "fp8_e4m3":
            self.kv_cache_dtype = "fp8"
        checks += [
            ("quantization", self.quantization is None or self.quantization in SUPPORTED_QUANTIZATION,
             f"None or one of {', '.join(SUPPORTED_QUANTIZATION)} (FP8 e4m3 weights; FP8 checkpoints in the "
             "compressed-tensors and block-wise fp8 layouts also load); awq, gptq, bitsandbytes and other "
             "methods are not supported"),
            ("kv_cache_dtype", self.kv_cache_dtype in SUPPORTED_KV_CACHE_DTYPES,
             f"one of {', '.join(SUPPORTED_KV_CACHE_DTYPES)}"),
        ]
        for name, ok, rule in checks:
            if not ok:
                raise InvalidRequestError(f"{name} must be {rule}, got {getattr(self, name)!r}", field=name)

    def resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
