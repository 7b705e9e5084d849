"""Sampler: picks the next token of every sampled sequence at once, on the logits' device.

Order of operations follows vLLM: a structured-output request's grammar mask first, then penalties on the raw logits, then the token rules (logit_bias added,
allowed_token_ids and bad_words masked), then min_tokens masking, then greedy rows take the argmax; the others are divided by their temperature, cut by top-k, top-p and min-p, and
sampled with the exponential-race trick (argmax of p / q, q ~ Exp(1)), which needs no sort. A request
with a seed draws its q from its own generator, so its tokens do not depend on its neighbours.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .grammar import apply_bitmask
from .logprobs import TokenLogprobs, token_logprobs
from .sampling_params import SamplingParams


@dataclass
class SamplingRow:
    """One sequence's inputs to the sampler."""

    params: SamplingParams
    prompt_token_ids: list[int]
    output_token_ids: list[int]
    generator: torch.Generator | None  # for seeded requests
    blocked_token_ids: list[int]  # tokens forbidden this step (EOS / stop tokens before min_tokens)


@dataclass
class SamplerOutput:
    token_ids: list[int]
    logprobs: list[TokenLogprobs | None]


def _column(rows: list[SamplingRow], name: str, dtype: torch.dtype, device) -> torch.Tensor:
    return torch.tensor([getattr(r.params, name) for r in rows], dtype=dtype, device=device)


def apply_penalties(logits: torch.Tensor, rows: list[SamplingRow]) -> torch.Tensor:
    """Repetition penalty over prompt + output tokens; presence and frequency over output tokens."""
    num_rows, vocab = logits.shape
    device = logits.device
    max_out = max(len(r.output_token_ids) for r in rows)
    out_ids = torch.full((num_rows, max_out + 1), vocab, dtype=torch.long)
    for i, r in enumerate(rows):
        out_ids[i, :len(r.output_token_ids)] = torch.tensor(r.output_token_ids, dtype=torch.long)
    counts = torch.zeros(num_rows, vocab + 1, device=device)
    counts.scatter_add_(1, out_ids.to(device), torch.ones(out_ids.shape, device=device))
    counts = counts[:, :vocab]
    rep = _column(rows, "repetition_penalty", torch.float32, device)
    if bool((rep != 1.0).any()):
        seen = counts > 0
        for i, r in enumerate(rows):
            if r.params.repetition_penalty != 1.0 and r.prompt_token_ids:
                seen[i, torch.tensor(r.prompt_token_ids, device=device)] = True
        penalty = torch.where(seen, rep[:, None], torch.ones_like(logits))
        logits = torch.where(logits > 0, logits / penalty, logits * penalty)
    freq = _column(rows, "frequency_penalty", torch.float32, device)
    pres = _column(rows, "presence_penalty", torch.float32, device)
    return logits - freq[:, None] * counts - pres[:, None] * (counts > 0).float()


def apply_token_rules(logits: torch.Tensor, rows: list[SamplingRow]) -> torch.Tensor:
    """Add each row's logit_bias; keep only its allowed_token_ids; forbid the last token of any bad
    word whose other tokens end the output so far (a one-token bad word is always forbidden)."""
    device = logits.device
    for i, r in enumerate(rows):
        p = r.params
        if p.logit_bias:
            ids = torch.tensor(list(p.logit_bias), dtype=torch.long, device=device)
            logits[i, ids] += torch.tensor(list(p.logit_bias.values()), dtype=logits.dtype, device=device)
        if p.allowed_token_ids:
            keep = torch.zeros(logits.shape[1], dtype=torch.bool, device=device)
            keep[torch.tensor(p.allowed_token_ids, dtype=torch.long, device=device)] = True
            logits[i].masked_fill_(~keep, float("-inf"))
        banned = [word[-1] for word in p._bad_words_token_ids or ()
                  if len(word) == 1 or r.output_token_ids[-(len(word) - 1):] == word[:-1]]
        if banned:
            logits[i, torch.tensor(banned, dtype=torch.long, device=device)] = float("-inf")
    return logits


def filter_top_k_top_p_min_p(logits: torch.Tensor, rows: list[SamplingRow]) -> torch.Tensor:
    """Set the logits that top-k, top-p or min-p exclude to -inf (rows that use none are untouched)."""
    device = logits.device
    vocab = logits.shape[1]
    top_k = _column(rows, "top_k", torch.long, device)
    top_p = _column(rows, "top_p", torch.float32, device)
    min_p = _column(rows, "min_p", torch.float32, device)
    if bool(((top_k > 0) & (top_k < vocab)).any()) or bool((top_p < 1).any()):
        sorted_logits, sorted_idx = logits.sort(dim=-1, descending=True)
        k = torch.where(top_k > 0, top_k.clamp(max=vocab), torch.full_like(top_k, vocab))
        ranks = torch.arange(vocab, device=device)[None, :]
        cut = ranks >= k[:, None]
        probs = sorted_logits.masked_fill(cut, float("-inf")).softmax(dim=-1)
        # Drop a token when the tokens ranked above it already reach top_p (the top one always stays).
        cut |= (probs.cumsum(dim=-1) - probs) >= top_p[:, None]
        cut[:, 0] = False
        logits = logits.scatter(1, sorted_idx, sorted_logits.masked_fill(cut, float("-inf")))
    if bool((min_p > 0).any()):
        probs = logits.softmax(dim=-1)
        threshold = min_p[:, None] * probs.max(dim=-1, keepdim=True).values
        logits = logits.masked_fill(probs < threshold, float("-inf"))
    return logits


TWO_STAGE_MAX_ROWS = 16  # past this, torch's own argmax has rows enough to fill the GPU


def argmax_rows(logits: torch.Tensor) -> torch.Tensor:
    """logits [R, V] -> the index of each row's max (the first on ties, as torch.argmax).

    For few rows, in two stages: torch's argmax reduces each 128k-wide row in one block (28 us for
    one Llama-3 row on an H200); the max of each 256-wide chunk, then the argmax of the chunk maxima,
    spreads the work over the GPU (12 us). Ties resolve the same way: the first maximal chunk, then
    its first maximal element.
    """
    num_rows, vocab = logits.shape
    width = 256
    while width > 32 and vocab % width:
        width //= 2
    if num_rows > TWO_STAGE_MAX_ROWS or vocab % width or not logits.is_contiguous():
        return logits.argmax(dim=-1)
    chunk_max, chunk_idx = logits.view(num_rows, vocab // width, width).max(dim=-1)
    best = chunk_max.argmax(dim=-1, keepdim=True)  # [R, 1]
    return (best * width + chunk_idx.gather(1, best)).squeeze(1)


def sample(logits: torch.Tensor, rows: list[SamplingRow],
           mask: tuple[torch.Tensor, list[int]] | None = None) -> SamplerOutput:
    """logits [R, V] (any float dtype) for R sequences -> one token id each (and logprobs if asked).

    `mask`: (token bitmask [R, ceil(V / 32)] int32 on the logits' device, the rows it constrains), or
    None. Logprobs stay the model's own: with them, the mask is applied to a copy."""
    raw = logits
    if mask is not None:
        if any(r.params.logprobs is not None for r in rows):
            logits = logits.clone()
        apply_bitmask(logits, *mask)
    if all(r.params.greedy and not r.params.uses_penalties and not r.params.uses_token_rules
           and not r.blocked_token_ids and r.params.logprobs is None for r in rows):
        return SamplerOutput(argmax_rows(logits).tolist(), [None] * len(rows))  # the common fast path
    masked = logits is not raw
    raw = raw.float()
    logits = logits.float() if masked else raw
    device = logits.device
    if any(r.params.uses_penalties for r in rows):
        logits = apply_penalties(logits, rows)
    if any(r.params.uses_token_rules for r in rows):
        logits = apply_token_rules(logits if logits is not raw else logits.clone(), rows)
    for i, r in enumerate(rows):
        if r.blocked_token_ids:
            logits[i, torch.tensor(r.blocked_token_ids, device=device)] = float("-inf")
    greedy = [r.params.greedy for r in rows]
    token_ids = argmax_rows(logits)
    if not all(greedy):
        temp = torch.tensor([r.params.temperature or 1.0 for r in rows], device=device)
        scaled = filter_top_k_top_p_min_p(logits / temp[:, None], rows)
        probs = scaled.softmax(dim=-1)
        q = torch.empty_like(probs).exponential_()
        for i, r in enumerate(rows):
            if r.generator is not None:
                q[i] = torch.empty(probs.shape[1], device=device).exponential_(generator=r.generator)
        sampled = (probs / q).argmax(dim=-1)
        is_greedy = torch.tensor(greedy, device=device)
        token_ids = torch.where(is_greedy, token_ids, sampled)
    ids = token_ids.tolist()
    return SamplerOutput(ids, _logprobs(raw, ids, rows))


def _logprobs(raw: torch.Tensor, ids: list[int], rows: list[SamplingRow]) -> list[TokenLogprobs | None]:
    """The model's own log-probabilities (before any sampling transform), as vLLM reports them."""
    want = [i for i, r in enumerate(rows) if r.params.logprobs is not None]
    result: list[TokenLogprobs | None] = [None] * len(rows)
    if not want:
        return result
    index = torch.tensor(want, device=raw.device)
    entries = token_logprobs(raw.index_select(0, index), [ids[i] for i in want],
                             [rows[i].params.logprobs for i in want])
    for i, entry in zip(want, entries):
        result[i] = entry
    return result
