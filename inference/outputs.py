"""What the engine hands back: vLLM-shaped offline outputs and streaming deltas."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Logprob:
    """One token's log-probability at one position (vLLM's Logprob): `rank` over the whole vocabulary
    (1 = the likeliest), `decoded_token` its text."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


# Per position, {token id: Logprob}: the chosen token (sampled, or the prompt's own) and the top k.
PositionLogprobs = dict[int, Logprob]


@dataclass
class CompletionOutput:
    """One generated sequence of a request (vLLM's CompletionOutput)."""

    index: int
    text: str
    token_ids: list[int]
    finish_reason: str | None  # "stop" | "length" | "abort" | None while running
    stop_reason: str | int | None = None  # the stop string or token id that ended it
    logprobs: list[PositionLogprobs] | None = None  # per generated token, with SamplingParams.logprobs
    cumulative_logprob: float | None = None


@dataclass
class RequestStateStats:
    """A request's timings (vLLM v1's RequestStateStats, which is what its RequestOutput.metrics holds).

    Every time is `time.monotonic()` seconds of the engine's process (vLLM's arrival_time is
    wall-clock; here all are on one clock, so differences are durations). None: it never happened
    (a request aborted while it waited was never scheduled). vLLM v0's RequestMetrics names are
    properties: first_scheduled_time, first_token_time, last_token_time, finished_time, time_in_queue.
    """

    num_generation_tokens: int = 0
    arrival_time: float | None = None
    queued_ts: float | None = None
    scheduled_ts: float | None = None  # first admitted into a step
    first_token_ts: float | None = None
    last_token_ts: float | None = None
    finished_ts: float | None = None
    first_token_latency: float | None = None  # first_token_ts - arrival_time
    num_preemptions: int = 0
    is_corrupted: bool = False

    @property
    def first_scheduled_time(self) -> float | None:
        return self.scheduled_ts

    @property
    def first_token_time(self) -> float | None:
        return self.first_token_ts

    @property
    def last_token_time(self) -> float | None:
        return self.last_token_ts

    @property
    def finished_time(self) -> float | None:
        return self.finished_ts

    @property
    def time_in_queue(self) -> float | None:
        if self.scheduled_ts is None or self.arrival_time is None:
            return None
        return self.scheduled_ts - self.arrival_time


@dataclass
class RequestOutput:
    """A finished request (vLLM's RequestOutput). `prompt_logprobs`, with SamplingParams.prompt_logprobs:
    one entry per prompt token, None for the first (nothing precedes it)."""

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    num_cached_tokens: int = 0
    finished: bool = True
    prompt_logprobs: list[PositionLogprobs | None] | None = None
    metrics: RequestStateStats | None = None


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
    # arrival / first_scheduled / first_token / last_token / finished times (time.monotonic() seconds)
    # and num_preemptions, on a request's first and last delta
    metrics: dict = field(default_factory=dict)
    # With SamplingParams.prompt_logprobs, on the first delta: one entry per prompt token (the first None)
    prompt_logprobs: list | None = None
