"""SamplingParams: how to pick each next token, with vLLM's meaning and defaults."""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import InvalidRequestError


@dataclass
class SamplingParams:
    """Per-request sampling settings (vLLM semantics).

    temperature 0 means greedy; top_k 0 or -1 disables top-k; stop strings are not emitted;
    `seed` makes a request's sampling reproducible whatever else runs beside it; `logprobs=k`
    returns the sampled token's log-probability and the k most likely alternatives.
    """

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    max_tokens: int | None = 16
    min_tokens: int = 0
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    seed: int | None = None
    logprobs: int | None = None
    skip_special_tokens: bool = True
    stop_strings: list[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop_strings = [self.stop]
        else:
            self.stop_strings = list(self.stop or [])
        self.stop_token_ids = list(self.stop_token_ids or [])
        if self.top_k == -1:
            self.top_k = 0
        self._validate()

    def _fail(self, name: str, rule: str) -> None:
        raise InvalidRequestError(f"{name} must be {rule}, got {getattr(self, name)!r}", field=name)

    def _validate(self) -> None:
        def is_int(v: object) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        def is_num(v: object) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v  # v == v rejects NaN

        if not is_int(self.n) or self.n < 1:
            self._fail("n", "an integer >= 1")
        if not is_num(self.temperature) or self.temperature < 0:
            self._fail("temperature", ">= 0")
        if not is_num(self.top_p) or not 0 < self.top_p <= 1:
            self._fail("top_p", "in (0, 1]")
        if not is_int(self.top_k) or self.top_k < 0:
            self._fail("top_k", "an integer >= 1, or 0 / -1 to disable")
        if not is_num(self.min_p) or not 0 <= self.min_p <= 1:
            self._fail("min_p", "in [0, 1]")
        if not is_num(self.repetition_penalty) or self.repetition_penalty <= 0:
            self._fail("repetition_penalty", "> 0")
        if not is_num(self.presence_penalty) or not -2 <= self.presence_penalty <= 2:
            self._fail("presence_penalty", "in [-2, 2]")
        if not is_num(self.frequency_penalty) or not -2 <= self.frequency_penalty <= 2:
            self._fail("frequency_penalty", "in [-2, 2]")
        if self.max_tokens is not None and (not is_int(self.max_tokens) or self.max_tokens < 1):
            self._fail("max_tokens", "an integer >= 1 (or None for the rest of the context)")
        if not is_int(self.min_tokens) or self.min_tokens < 0:
            self._fail("min_tokens", "an integer >= 0")
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            self._fail("min_tokens", f"<= max_tokens ({self.max_tokens})")
        if not all(isinstance(s, str) and s for s in self.stop_strings):
            self._fail("stop", "a non-empty string or a list of non-empty strings")
        if not all(is_int(t) and t >= 0 for t in self.stop_token_ids):
            self._fail("stop_token_ids", "a list of token ids >= 0")
        if self.seed is not None and not is_int(self.seed):
            self._fail("seed", "an integer or None")
        if self.logprobs is not None and (not is_int(self.logprobs) or not 0 <= self.logprobs <= 20):
            self._fail("logprobs", "an integer in [0, 20] or None")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def uses_penalties(self) -> bool:
        return (self.repetition_penalty != 1.0 or self.presence_penalty != 0.0
                or self.frequency_penalty != 0.0)
