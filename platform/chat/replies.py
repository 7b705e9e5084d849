"""ReplyStream: what one engine request's deltas add up to (text, counts, finish reason, clock)."""
from __future__ import annotations

import time

from chat.models import Message

# How an engine finish reason is stored: a natural end is complete, an abort (stop button, closed tab) stopped.
_STATUS_BY_FINISH = {"stop": Message.Status.COMPLETE, "length": Message.Status.COMPLETE,
                     "abort": Message.Status.STOPPED}


class ReplyStream:
    """Accumulates the StreamDeltas of one reply as the consumer forwards them."""

    def __init__(self) -> None:
        self.text = ""
        self.finish_reason: str | None = None
        self.num_prompt_tokens = 0
        self.num_cached_tokens = 0
        self.num_output_tokens = 0
        self.started_at = time.monotonic()
        self.first_token_at: float | None = None

    def take(self, delta) -> None:
        if self.first_token_at is None and delta.token_ids:
            self.first_token_at = time.monotonic()
        self.text += delta.text
        self.num_prompt_tokens = delta.num_prompt_tokens
        self.num_cached_tokens = delta.num_cached_tokens
        self.num_output_tokens = delta.num_output_tokens
        if delta.finished:
            self.finish_reason = delta.finish_reason

    @property
    def status(self) -> str:
        """complete / stopped from the finish reason; stopped when the stream never finished."""
        return _STATUS_BY_FINISH.get(self.finish_reason or "abort", Message.Status.COMPLETE)

    def usage(self) -> dict:
        return {"prompt_tokens": self.num_prompt_tokens, "completion_tokens": self.num_output_tokens,
                "cached_tokens": self.num_cached_tokens}

    def timings_ms(self) -> dict:
        """time_to_first_token_ms and duration_ms, as finish_reply stores them."""
        ttft = None if self.first_token_at is None else round((self.first_token_at - self.started_at) * 1000)
        return {"time_to_first_token_ms": ttft, "duration_ms": round((time.monotonic() - self.started_at) * 1000)}
