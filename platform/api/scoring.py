"""Prompt log-probabilities in API answers: `echo` with `logprobs` on /v1/completions (OpenAI's way to
score a text) and vLLM's `prompt_logprobs` extra on both endpoints.

The engine scores every prompt token it was given (SamplingParams.prompt_logprobs). An answer shows
the client's part of the prompt only, the tokens after the tenant's system turn, which echo never
shows either. The client's first token is scored when the system turn precedes it (the model saw that
context), and is null when it starts the prompt (nothing precedes it), as in vLLM.

With n choices only the first choice's engine request scores the prompt (the prompt is the same).
"""
from __future__ import annotations

from typing import Any, Callable

from tenants.system_turn import system_prefix_ids


class PrefixLength:
    """How many prompt tokens the tenant's system turn took: `measuring(encode)` wraps a plan's
    prompt encoder and notes it as the prompt is encoded."""

    length = 0

    def measuring(self, encode: Callable[[Any, str | None], list[int]]) -> Callable[[Any, str | None], list[int]]:
        def measured(engine: Any, system_prompt: str | None) -> list[int]:
            self.length = len(system_prefix_ids(engine, system_prompt))
            return encode(engine, system_prompt)

        return measured


def client_part(prompt_ids: list[int], entries: list, num_prefix_tokens: int) -> tuple[list[int], list]:
    """(token ids, engine logprob entries) of the prompt after the tenant's system turn."""
    return prompt_ids[num_prefix_tokens:], entries[num_prefix_tokens:]


def vllm_prompt_logprobs(tokenizer: Any, entries: list) -> list:
    """vLLM's `prompt_logprobs` JSON: per prompt token null, or {"token id": {logprob, rank, decoded_token}}
    for the prompt's own token and the k likeliest."""
    return [None if entry is None else
            {str(t): {"logprob": lp, "rank": entry.rank_of(t), "decoded_token": tokenizer.decode([t])}
             for t, lp in entry.items()}
            for entry in entries]
