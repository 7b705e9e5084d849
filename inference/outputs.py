"""What the engine hands back: vLLM-shaped offline outputs and streaming deltas."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CompletionOutput:
    """One generated sequence of a request (vLLM's CompletionOutput)."""

    index: int
    text: str
    token_ids: list[int]
    finish_reason: str | None  # "stop" | "length" | "abort" | None while running
    stop_reason: str | int | None = None  # the stop string or token id that ended it
    logprobs: list[dict[int, float]] | None = None  # per token: {token_id: logprob} (sampled + top-k)
    cumulative_logprob: float | None = None


@dataclass
class RequestOutput:
    """A finished request (vLLM's RequestOutput)."""

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    num_cached_tokens: int = 0
    finished: bool = True


@dataclass
class StreamDelta:
    """What a streaming request produced since the last delta.

    `text` holds only whole characters (an incomplete UTF-8 sequence waits for its next token), and
    never any part of a stop string.
    """

    request_id: str
    text: str
    token_ids: list[int]
    finished: bool
    finish_reason: str | None
    num_prompt_tokens: int
    num_cached_tokens: int
    num_output_tokens: int
    stop_reason: str | int | None = None
    logprobs: list[dict[int, float]] | None = None
    error: str | None = None
    metrics: dict = field(default_factory=dict)  # arrival / first_token / finished times (monotonic s)
