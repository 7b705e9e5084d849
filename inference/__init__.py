"""Pagoda's inference engine: continuous batching over a paged KV cache with prefix reuse.

    from inference import LLM, SamplingParams
    llm = LLM()  # the embedded SmolLM2-135M-Instruct
    outputs = llm.generate(["Hello, my name is"], SamplingParams(temperature=0.8, top_p=0.95))
"""
from .async_llm import AsyncLLM, PinInfo
from .config import DEFAULT_MODEL, EngineConfig
from .engine import LLMEngine
from .llm import LLM
from .outputs import CompletionOutput, Logprob, RequestOutput, RequestStateStats, StreamDelta
from .sampling_params import RequestOutputKind, SamplingParams
from .structured_outputs import StructuredOutputsParams

__all__ = ["LLM", "SamplingParams", "AsyncLLM", "PinInfo", "EngineConfig", "LLMEngine", "DEFAULT_MODEL",
           "CompletionOutput", "RequestOutput", "StreamDelta", "RequestOutputKind", "Logprob", "RequestStateStats",
           "StructuredOutputsParams"]
