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
    # With params.prompt_logprobs: one entry per prompt token recorded so far (token 0's is None:
    # nothing precedes it); None for a request that did not ask.
    prompt_logprobs: list | None = None
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
    last_token_time: float | None = None
    finish_time: float | None = None
    admitted_once: bool = False
    generator: object = None  # torch.Generator of a seeded request, made by the model runner
    # The grammar matcher of a request with structured_outputs (inference/grammar.py); it has accepted
    # every output token, so it survives preemption as the tokens do.
    grammar: object = None
    # The prompt as int64s (validation builds it): block hashes read their bytes from here.
    prompt_array: array | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.params.prompt_logprobs is not None and self.prompt_logprobs is None:
            self.prompt_logprobs = [None]

    @property
    def num_cacheable_tokens(self) -> int:
        """Leading tokens the prefix cache may serve: all but the last, whose logits are sampled. A
        cached block has no logits, so a request with prompt logprobs takes only the positions whose
        logits it has recorded: none at first (as vLLM skips the cache for it), after a preemption
        what it had computed."""
        if self.prompt_logprobs is None:
            return self.num_tokens - 1
        return min(self.num_tokens - 1, len(self.prompt_logprobs) - 1)

    def prompt_logit_positions(self, start: int, num_new_tokens: int) -> range:
        """Positions among [start, start + num_new_tokens) whose logits give a prompt token's logprob
        not recorded yet (position p's logits score token p + 1). Empty unless prompt logprobs were asked."""
        if self.prompt_logprobs is None:
            return range(0)
        return range(max(start, len(self.prompt_logprobs) - 1),
                     min(start + num_new_tokens, self.num_prompt_tokens - 1))

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
