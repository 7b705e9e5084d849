"""Log-probabilities as the engine reports them: one `TokenLogprobs` per position.

The sampler computes them for generated tokens (`SamplingParams.logprobs`) and the model runner for
prompt tokens (`prompt_logprobs`, see prompt_logprobs.py), both with `token_logprobs`, from the
model's raw logits (before temperature, penalties or any other sampling transform), as vLLM reports
them.
"""
from __future__ import annotations

from typing import Callable

import torch


class TokenLogprobs(dict):
    """{token id: logprob} at one position: the chosen token (the sampled one, or the prompt's own)
    first, then the k likeliest, likeliest first (the chosen one once if it is among them).

    `rank` is the chosen token's rank over the whole vocabulary (1 = the likeliest), as vLLM's
    `Logprob.rank`. A plain dict otherwise, so code that reads {id: logprob} (the OpenAI formats)
    reads it unchanged; `rank` survives pickling (engine core -> frontend).
    """

    __slots__ = ("rank",)

    def __init__(self, items: dict[int, float], rank: int):
        super().__init__(items)
        self.rank = rank

    def __reduce__(self):
        return TokenLogprobs, (dict(self), self.rank)

    def rank_of(self, token_id: int) -> int:
        """The rank of any token held here. For one of the k likeliest, every token ranked above it
        is held here too, so counting the held tokens with a higher logprob gives its rank."""
        if token_id == next(iter(self)):
            return self.rank
        logprob = self[token_id]
        return 1 + sum(1 for lp in self.values() if lp > logprob)


def token_logprobs(logits: torch.Tensor, chosen_ids: list[int], ks: list[int]) -> list[TokenLogprobs]:
    """logits [R, V] (any float dtype); row i's chosen token and its number of alternatives ks[i]
    -> one TokenLogprobs per row. One transfer to the host for the whole batch."""
    logp = logits.float().log_softmax(dim=-1)
    chosen = logp.gather(1, torch.tensor(chosen_ids, dtype=torch.long, device=logp.device)[:, None])
    # Ties count in the token's favour, as vLLM ranks it: only strictly likelier tokens come first.
    ranks = ((logp > chosen).sum(dim=-1) + 1).tolist()
    chosen_lps = chosen.squeeze(1).tolist()
    k = max(ks, default=0)
    top_lps, top_ids = ([], []) if k == 0 else (t.tolist() for t in logp.topk(k, dim=-1))
    entries = []
    for i, token in enumerate(chosen_ids):
        items = {token: chosen_lps[i]}
        for j in range(ks[i]):
            items.setdefault(top_ids[i][j], top_lps[i][j])
        entries.append(TokenLogprobs(items, ranks[i]))
    return entries


def as_vllm(entries: list, decode: Callable[[int], str] | None) -> list:
    """Engine entries (TokenLogprobs, or None for a prompt's first token) -> vLLM's {token id: Logprob}
    per position; `decode` gives each token's text (None: no text, as vLLM with detokenize=False)."""
    from .outputs import Logprob

    return [None if entry is None else
            {t: Logprob(lp, entry.rank_of(t), decode(t) if decode else None) for t, lp in entry.items()}
            for entry in entries]
