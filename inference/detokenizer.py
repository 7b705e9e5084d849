"""Incremental detokenization: text as tokens arrive, never a split UTF-8 character, stop strings held back."""
from __future__ import annotations

from typing import Any

from .sampling_params import SamplingParams

REPLACEMENT = "\ufffd"
CONTEXT_TOKENS = 5  # prompt tokens decoded before the output, so the first word gets its leading space


class IncrementalDetokenizer:
    """Turns output token ids into text one token at a time.

    Each token re-decodes only a short window (from `prefix_offset`), and text is released only once
    it no longer ends in a replacement character, i.e. once every multi-byte character is complete.
    Text that could be the start of a stop string is held back until it is known not to be one.
    Stop strings count only once more than `min_tokens` tokens are out (vLLM's rule); with
    `include_stop` the text keeps the stop string that ended it.
    """

    def __init__(self, tokenizer, prompt_token_ids: list[int], stop_strings: list[str],
                 skip_special_tokens: bool = True, *, include_stop: bool = False, min_tokens: int = 0):
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self.stop_strings = stop_strings
        self.include_stop = include_stop
        self.min_tokens = min_tokens
        self.num_tokens = 0  # output tokens fed so far
        self.holdback = max((len(s) for s in stop_strings), default=1) - 1
        self.ids = list(prompt_token_ids[-CONTEXT_TOKENS:])
        self.prefix_offset = 0
        self.read_offset = len(self.ids)
        self.text = ""
        self.num_emitted = 0  # characters of self.text already handed out

    @classmethod
    def for_request(cls, tokenizer: Any, prompt_token_ids: list[int],
                    params: SamplingParams) -> IncrementalDetokenizer | None:
        """The detokenizer of one request, or None when there is no text to make (no tokenizer, or
        `detokenize=False`)."""
        if tokenizer is None or not params.detokenize:
            return None
        return cls(tokenizer, prompt_token_ids, params.stop_strings, params.skip_special_tokens,
                   include_stop=params.include_stop_str_in_output, min_tokens=params.min_tokens)

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens)

    def add(self, token_id: int) -> str | None:
        """Feed one token. Returns the stop string it completed, if any (the text is cut before it)."""
        self.ids.append(token_id)
        self.num_tokens += 1
        prefix = self._decode(self.ids[self.prefix_offset:self.read_offset])
        full = self._decode(self.ids[self.prefix_offset:])
        if len(full) <= len(prefix) or full.endswith(REPLACEMENT):
            return None  # an incomplete character (or nothing visible yet): wait for the next token
        start = len(self.text)
        self.text += full[len(prefix):]
        self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
        return self._find_stop(start)

    def _find_stop(self, start: int) -> str | None:
        if self.num_tokens <= self.min_tokens:
            return None
        best: tuple[int, str] | None = None
        for stop in self.stop_strings:
            i = self.text.find(stop, max(0, start - len(stop) + 1))
            if i != -1 and (best is None or i < best[0]):
                best = (i, stop)
        if best is None:
            return None
        self.text = self.text[:best[0] + (len(best[1]) if self.include_stop else 0)]
        return best[1]

    def delta(self, finished: bool) -> str:
        """Text not yet handed out; while running, the tail that may begin a stop string stays back."""
        end = len(self.text) if finished or not self.stop_strings else max(
            self.num_emitted, len(self.text) - self.holdback)
        out = self.text[self.num_emitted:end]
        self.num_emitted = end
        return out
