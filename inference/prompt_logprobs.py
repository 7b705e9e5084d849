"""Prompt logprobs (`SamplingParams.prompt_logprobs`): every prompt token's log-probability, from the
logits at the position before it, for scoring and perplexity.

Only the requests that ask pay. A step that holds such a request's prompt positions runs eagerly (the
CUDA graphs return the sampled rows' logits only) and computes the lm_head over those positions too,
in slices of ROWS_PER_SLICE rows so that a long chunk's logits never sit in memory all at once. Steps
without such a request do not change: a decode step never holds a prompt position that needs logits.

Chunked prefill needs nothing more: each chunk records the positions it computes
(`Sequence.prompt_logit_positions`). A prefix-cache hit has no logits, so such a request takes from
the cache only the positions it has recorded (`Sequence.num_cacheable_tokens`): none when it first
arrives (vLLM skips the cache for it too), what it had computed when it comes back after a preemption.
Its own blocks are cached as usual, so later requests hit them.
"""
from __future__ import annotations

from typing import Any

import torch

from .logprobs import TokenLogprobs, token_logprobs
from .scheduler import SchedulerOutput

ROWS_PER_SLICE = 256  # logits rows at once: 256 x a 152k vocabulary in fp32 is 156 MB

Wanted = list[tuple[int, range]]  # (index in out.scheduled, the positions whose logits it needs)


def wanted_positions(out: SchedulerOutput) -> Wanted:
    """The scheduled sequences that need logits at some of this step's prompt positions."""
    wanted = []
    for i, s in enumerate(out.scheduled):
        positions = s.seq.prompt_logit_positions(s.start, s.num_new_tokens)
        if positions:
            wanted.append((i, positions))
    return wanted


def compute(model: Any, hidden: torch.Tensor, out: SchedulerOutput, wanted: Wanted) -> dict[int, list[TokenLogprobs]]:
    """hidden [num_batched_tokens, H] of the step's eager forward pass -> {index in out.scheduled:
    the TokenLogprobs of the prompt tokens that follow its wanted positions, in order}."""
    starts = [0]
    for s in out.scheduled:
        starts.append(starts[-1] + s.num_new_tokens)
    rows: list[int] = []
    targets: list[int] = []
    ks: list[int] = []
    for i, positions in wanted:
        s = out.scheduled[i]
        rows += [starts[i] + p - s.start for p in positions]
        targets += s.seq.prompt_token_ids[positions.start + 1:positions.stop + 1]
        ks += [s.seq.params.prompt_logprobs] * len(positions)
    index = torch.tensor(rows, dtype=torch.long, device=hidden.device)
    entries: list[TokenLogprobs] = []
    for a in range(0, len(rows), ROWS_PER_SLICE):
        logits = model.compute_logits(hidden.index_select(0, index[a:a + ROWS_PER_SLICE]))
        entries += token_logprobs(logits, targets[a:a + ROWS_PER_SLICE], ks[a:a + ROWS_PER_SLICE])
    result, at = {}, 0
    for i, positions in wanted:
        result[i] = entries[at:at + len(positions)]
        at += len(positions)
    return result
