"""Sequence: the state of one request as it moves through the scheduler."""
from __future__ import annotations

import enum
import time
from array import array
from dataclasses import dataclass, field

from .sampling_params import SamplingParams


class SequenceStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Sequence:
    """One request's tokens, KV blocks and progress.

    Scheduling is by tokens: `num_computed_tokens` (tokens whose K/V are in the cache) catches up
    with `num_tokens` (prompt + output). A prefix-cache hit or a chunk of prefill simply moves
    `num_computed_tokens` forward; a preemption sets it back to zero.
    """

    request_id: str
    prompt_token_ids: list[int]
    params: SamplingParams
    tenant: str | None = None
    prompt: str | None = None
    pin_key: str | None = None  # set for the internal request that computes a prefix to pin
    arrival_time: float = field(default_factory=time.monotonic)

    output_token_ids: list[int] = field(default_factory=list)
    output_logprobs: list[dict[int, float]] = field(default_factory=list)
    block_table: list[int] = field(default_factory=list)
    # Chained hashes of this sequence's full blocks, as far as they have been computed.
    block_hashes: list[bytes] = field(default_factory=list)
    num_committed_blocks: int = 0  # leading blocks already registered in the prefix cache
    num_computed_tokens: int = 0
    num_cached_tokens: int = 0  # prompt tokens served by the prefix cache at first admission
    num_preemptions: int = 0
    status: SequenceStatus = SequenceStatus.WAITING
    finish_reason: str | None = None
    stop_reason: str | int | None = None
    first_scheduled_time: float | None = None  # first admission: arrival -> this is queue time
    first_token_time: float | None = None
    finish_time: float | None = None
    admitted_once: bool = False
    generator: object = None  # torch.Generator of a seeded request, made by the model runner
    # The grammar matcher of a request with structured_outputs (inference/grammar.py); it has accepted
    # every output token, so it survives preemption as the tokens do.
    grammar: object = None
    # The prompt as int64s (validation builds it): block hashes read their bytes from here.
    prompt_array: array | None = field(default=None, repr=False)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    def token_ids(self, start: int = 0, stop: int | None = None) -> list[int]:
        """All tokens (prompt then output) in [start, stop)."""
        n_prompt = len(self.prompt_token_ids)
        stop = self.num_tokens if stop is None else stop
        if stop <= n_prompt:
            return self.prompt_token_ids[start:stop]
        if start >= n_prompt:
            return self.output_token_ids[start - n_prompt:stop - n_prompt]
        return self.prompt_token_ids[start:] + self.output_token_ids[:stop - n_prompt]

    def token_bytes(self, start: int, stop: int) -> bytes:
        """Tokens [start, stop) as int64 bytes: what a block hash is computed over."""
        if stop <= len(self.prompt_token_ids):
            if self.prompt_array is None:
                self.prompt_array = array("q", self.prompt_token_ids)
            return self.prompt_array[start:stop].tobytes()
        return array("q", self.token_ids(start, stop)).tobytes()

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED
