"""SamplingParams: how to pick each next token, with vLLM's meaning and defaults."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidRequestError
from .structured_outputs import StructuredOutputsParams

SEED_MIN, SEED_MAX = -(2 ** 63), 2 ** 64 - 1  # what torch.Generator.manual_seed takes
TOP_K_MAX = 2 ** 31 - 1  # a tensor column of int64 holds any k; past the vocabulary it means "all"
LOGIT_BIAS_MAX = 100.0  # OpenAI's range for logit_bias values: [-100, 100]


class RequestOutputKind(enum.IntEnum):
    """vLLM's output kinds: what each streamed output holds. The offline LLM always returns final outputs."""

    CUMULATIVE = 0
    DELTA = 1
    FINAL_ONLY = 2


@dataclass
class SamplingParams:
    """Per-request sampling settings (vLLM semantics).

    temperature 0 means greedy; top_k 0 or -1 disables top-k; stop strings are not emitted;
    `seed` makes a request's sampling reproducible whatever else runs beside it; `logprobs=k`
    returns the sampled token's log-probability and the k most likely alternatives;
    `prompt_logprobs=k` does the same for every prompt token (the first has none: nothing precedes it).

    Token rules (vLLM's): `logit_bias` {token id: bias in [-100, 100]} is added to the logits;
    `allowed_token_ids` restricts sampling to those ids; `bad_words` are never generated (each word,
    with and without a leading space, as the tokenizer splits it); `min_tokens` holds back EOS, stop
    token ids and stop strings until that many tokens are out. `include_stop_str_in_output` keeps
    the stop string in the text; `detokenize=False` returns token ids only (no text, no stop strings);
    `truncate_prompt_tokens=k` keeps the last k prompt tokens.

    `structured_outputs` (StructuredOutputsParams, or a dict of its fields) constrains the output to a
    JSON schema, a regex, a choice or a grammar; the request ends ("stop") when the grammar is complete.
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
    prompt_logprobs: int | None = None
    skip_special_tokens: bool = True
    logit_bias: dict[int, float] | None = None
    allowed_token_ids: list[int] | None = None
    bad_words: list[str] | None = None
    include_stop_str_in_output: bool = False
    truncate_prompt_tokens: int | None = None
    detokenize: bool = True
    output_kind: RequestOutputKind = RequestOutputKind.CUMULATIVE
    structured_outputs: StructuredOutputsParams | None = None
    # bad_words as token id sequences, filled in by bind_tokenizer() (the engine calls it on validation)
    _bad_words_token_ids: list[list[int]] | None = field(default=None, repr=False)
    stop_strings: list[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop_strings = [self.stop]
        else:
            self.stop_strings = list(self.stop or [])
        self.stop_token_ids = list(self.stop_token_ids or [])
        if self.top_k == -1:
            self.top_k = 0
        if isinstance(self.logit_bias, dict):  # JSON keys are strings: {"42": 5} means token 42
            self.logit_bias = {_token_key(k): v for k, v in self.logit_bias.items()}
        if isinstance(self.output_kind, int) and not isinstance(self.output_kind, bool) \
                and self.output_kind in iter(RequestOutputKind):
            self.output_kind = RequestOutputKind(self.output_kind)
        if self.structured_outputs is not None:
            self.structured_outputs = StructuredOutputsParams.from_value(self.structured_outputs)
        self._validate()
        self._validate_token_rules()

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
        if not is_int(self.top_k) or not 0 <= self.top_k <= TOP_K_MAX:
            self._fail("top_k", f"an integer in [1, {TOP_K_MAX}], or 0 / -1 to disable")
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
        if self.seed is not None and (not is_int(self.seed) or not SEED_MIN <= self.seed <= SEED_MAX):
            self._fail("seed", f"an integer in [{SEED_MIN}, {SEED_MAX}] or None")
        if self.logprobs is not None and (not is_int(self.logprobs) or not 0 <= self.logprobs <= 20):
            self._fail("logprobs", "an integer in [0, 20] or None")
        if self.prompt_logprobs is not None and (not is_int(self.prompt_logprobs)
                                                 or not 0 <= self.prompt_logprobs <= 20):
            self._fail("prompt_logprobs", "an integer in [0, 20] or None")

    def _validate_token_rules(self) -> None:
        def is_id(v: object) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and v >= 0

        def is_flag(name: str) -> None:
            if not isinstance(getattr(self, name), bool):
                self._fail(name, "True or False")

        if self.logit_bias is not None:
            if not isinstance(self.logit_bias, dict) or not all(
                    is_id(k) and isinstance(v, (int, float)) and not isinstance(v, bool)
                    and -LOGIT_BIAS_MAX <= v <= LOGIT_BIAS_MAX for k, v in self.logit_bias.items()):
                self._fail("logit_bias", "a map of token ids >= 0 to biases in [-100, 100]")
        if self.allowed_token_ids is not None and (
                not isinstance(self.allowed_token_ids, list) or not self.allowed_token_ids
                or not all(is_id(t) for t in self.allowed_token_ids)):
            self._fail("allowed_token_ids", "a non-empty list of token ids >= 0")
        if self.bad_words is not None and (not isinstance(self.bad_words, list)
                                           or not all(isinstance(w, str) and w.strip() for w in self.bad_words)):
            self._fail("bad_words", "a list of non-empty strings")
        for name in ("include_stop_str_in_output", "detokenize", "ignore_eos", "skip_special_tokens"):
            is_flag(name)
        if self.truncate_prompt_tokens is not None and (
                not isinstance(self.truncate_prompt_tokens, int) or isinstance(self.truncate_prompt_tokens, bool)
                or self.truncate_prompt_tokens < 1):
            self._fail("truncate_prompt_tokens", "an integer >= 1 or None")
        if not isinstance(self.output_kind, RequestOutputKind):
            self._fail("output_kind", "a RequestOutputKind (CUMULATIVE, DELTA or FINAL_ONLY)")
        if not self.detokenize and self.stop_strings:
            self._fail("stop", "empty when detokenize=False (stop strings are matched on the text)")

    def bind_tokenizer(self, tokenizer: Any, vocab_size: int) -> None:
        """Check token ids against the vocabulary and tokenize `bad_words` (the engine calls this
        before it queues the request). Raises InvalidRequestError naming the field."""
        for name, ids in (("logit_bias", self.logit_bias or {}), ("allowed_token_ids", self.allowed_token_ids or [])):
            if any(t >= vocab_size for t in ids):
                raise InvalidRequestError(f"{name} token ids must be < {vocab_size} (the vocabulary size)",
                                          field=name)
        if self.bad_words and self._bad_words_token_ids is None:
            if tokenizer is None:
                raise InvalidRequestError("bad_words needs a tokenizer; this engine has none", field="bad_words")
            self._bad_words_token_ids = bad_words_token_ids(tokenizer, self.bad_words)
        if self.structured_outputs is not None:
            self.structured_outputs.to_grammar()  # a bad schema, regex or grammar: refused here, before queueing

    def truncate_prompt(self, prompt_token_ids: list[int]) -> list[int]:
        """The prompt's last `truncate_prompt_tokens` tokens (all of it when None)."""
        k = self.truncate_prompt_tokens
        return list(prompt_token_ids) if k is None else list(prompt_token_ids)[-k:]

    @property
    def uses_token_rules(self) -> bool:
        """Whether the sampler must change this row's logits beyond temperature and penalties."""
        return bool(self.logit_bias or self.allowed_token_ids or self._bad_words_token_ids)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def uses_penalties(self) -> bool:
        return (self.repetition_penalty != 1.0 or self.presence_penalty != 0.0
                or self.frequency_penalty != 0.0)


def _token_key(key: object) -> object:
    """A logit_bias key as a token id: ints stay, decimal strings ("42") become ints, the rest is left
    for validation to refuse."""
    if isinstance(key, str) and key.strip().isdigit():
        return int(key)
    return key


def bad_words_token_ids(tokenizer: Any, bad_words: list[str]) -> list[list[int]]:
    """Each bad word as token ids, alone and after a space when that makes a different first token
    (as vLLM tokenizes them): "cat" and " cat" are different tokens in a BPE vocabulary."""
    sequences: list[list[int]] = []
    for word in bad_words:
        plain = tokenizer.encode(word.lstrip(), add_special_tokens=False)
        sequences.append(plain)
        spaced = tokenizer.encode(" " + word.lstrip(), add_special_tokens=False)
        if spaced and spaced[0] != plain[0] and len(spaced) == len(plain):
            sequences.append(spaced)
    return sequences
