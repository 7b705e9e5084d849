"""What rank 0 sends the workers each step: the part of a SchedulerOutput the model runner reads.

A worker has no scheduler and no sequences. Each scheduled sequence travels as a tuple (request id,
start, the step's token ids, block table, sample, is a pin, the positions whose prompt logits rank 0
computes) and is rebuilt as a `MirroredSeq`, which
answers the few questions ModelRunner.prepare and the CUDA graphs ask of a Sequence. The worker then
runs exactly the forward pass rank 0 runs (the same path: eager, decode graph or prefill graph).
"""
from __future__ import annotations

from ..scheduler import ScheduledSeq, SchedulerOutput

StepMessage = list[tuple[str, int, list[int], list[int], bool, bool, tuple[int, int]]]


def encode_step(out: SchedulerOutput) -> StepMessage:
    """Rank 0: one tuple per scheduled sequence; block tables are copied (they change after the step)."""
    message = []
    for s in out.scheduled:
        prompt_logits = s.seq.prompt_logit_positions(s.start, s.num_new_tokens)
        message.append((s.seq.request_id, s.start, s.seq.token_ids(s.start, s.start + s.num_new_tokens),
                        list(s.seq.block_table), s.sample, s.seq.pin_key is not None,
                        (prompt_logits.start, prompt_logits.stop)))
    return message


def decode_step(message: StepMessage) -> SchedulerOutput:
    """A worker: the SchedulerOutput its model runner executes."""
    scheduled = [ScheduledSeq(MirroredSeq(rid, start, token_ids, table, pin, range(*prompt_logits)), start,
                              len(token_ids), sample)
                 for rid, start, token_ids, table, sample, pin, prompt_logits in message]
    return SchedulerOutput(scheduled, sum(s.num_new_tokens for s in scheduled))


class MirroredSeq:
    """A sequence as a worker sees it: only this step's tokens (positions start.. start + n) and blocks."""

    __slots__ = ("request_id", "start", "new_token_ids", "block_table", "pin_key", "prompt_token_ids",
                 "output_token_ids", "prompt_logits")

    def __init__(self, request_id: str, start: int, token_ids: list[int], block_table: list[int], pin: bool,
                 prompt_logits: range = range(0)):
        self.request_id = request_id
        # Rank 0 runs a step with prompt logits eagerly: so must this worker, for the collectives to match.
        self.prompt_logits = prompt_logits
        self.start = start
        self.new_token_ids = token_ids
        self.block_table = block_table
        self.pin_key = "pin" if pin else None
        # The decode graphs read a sequence's last token from here; it is this step's (only) token.
        self.prompt_token_ids = token_ids
        self.output_token_ids = token_ids[-1:]

    def token_ids(self, start: int, stop: int) -> list[int]:
        return self.new_token_ids[start - self.start:stop - self.start]

    def prompt_logit_positions(self, start: int, num_new_tokens: int) -> range:
        return self.prompt_logits  # this step's, as rank 0's Sequence answered
