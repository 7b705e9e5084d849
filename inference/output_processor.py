"""OutputProcessor: what the engine makes of the tokens its steps sample.

It owns the record of every live request (its sequence, detokenizer and pin callback) and turns each
sampled token into a `StreamDelta`: append it to the sequence, advance its grammar (structured
outputs), check the stop conditions (EOS, stop tokens, stop strings, a complete grammar, max_tokens,
the context), detokenize, finish the request and free its blocks
through the scheduler. It also keeps the step count and, when asked, a trace of every step.

Both ways of stepping call it: `LLMEngine.run_step` (a synchronous step) and `AsyncScheduling`
(a decode step whose tokens are post-processed one step late), so a token is handled the same way
whichever ran it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .block_manager import Pin
from .detokenizer import IncrementalDetokenizer
from .errors import InvalidRequestError, RequestFailedError
from .outputs import StreamDelta
from .scheduler import Scheduler, SchedulerOutput
from .sequence import Sequence, SequenceStatus


@dataclass
class RequestState:
    """A live request: its sequence, its detokenizer (None without a tokenizer, or for a pin) and, for
    the internal request that computes a prefix to pin, who to tell when it is pinned."""

    seq: Sequence
    detok: IncrementalDetokenizer | None
    on_pinned: Callable[[Pin | Exception], None] | None = None


@dataclass
class StepTrace:
    """What one step did, for tests and benchmarks: which requests ran, joined, left and finished."""

    step: int
    num_batched_tokens: int  # tokens computed this step, over every request
    scheduled: list[tuple[str, int]]  # (request id, tokens computed this step)
    admitted: list[str]
    preempted: list[str]
    finished: list[str] = field(default_factory=list)  # ended by a token this step computed

    @property
    def decode_only(self) -> bool:
        """Every request computed one token: no prompt (or chunk of one) ran in this step."""
        return self.num_batched_tokens == len(self.scheduled)


class OutputProcessor:
    """Request records and token post-processing for one engine.

    `scheduler` is told when a request finishes or leaves (it frees the blocks); `eos_token_ids` and
    `max_model_len` are the stop conditions every request shares; `tokenizer` (or None) detokenizes.
    """

    def __init__(self, scheduler: Scheduler, tokenizer: Any, eos_token_ids: list[int], max_model_len: int):
        self.scheduler = scheduler
        self.tokenizer = tokenizer
        self.eos_token_ids = eos_token_ids
        self.max_model_len = max_model_len
        self.requests: dict[str, RequestState] = {}
        self.num_generation_tokens_total = 0
        self.num_steps = 0
        self.trace: list[StepTrace] | None = None  # set to [] to record every step

    # -- requests ------------------------------------------------------------------------------------
    def __contains__(self, request_id: str) -> bool:
        return request_id in self.requests

    def add(self, seq: Sequence, on_pinned: Callable[[Pin | Exception], None] | None = None) -> None:
        """Keep the record of a request being queued (a pin's, with `on_pinned`: it produces no text)."""
        detok = None
        if on_pinned is None:  # None too without a tokenizer, or with detokenize=False
            detok = IncrementalDetokenizer.for_request(self.tokenizer, seq.prompt_token_ids, seq.params)
        self.requests[seq.request_id] = RequestState(seq, detok, on_pinned)

    def get(self, seq: Sequence) -> RequestState | None:
        """The record of this very sequence, or None once it was aborted or finished (its id may since
        belong to a new request)."""
        req = self.requests.get(seq.request_id)
        return req if req is not None and req.seq is seq else None

    def abort(self, request_id: str) -> StreamDelta | None:
        """Stop a request now and free its blocks. Returns its final delta; None if unknown or a pin."""
        req = self.requests.pop(request_id, None)
        if req is None:
            return None
        self.scheduler.remove(req.seq)
        if req.on_pinned:
            req.on_pinned(InvalidRequestError("pin aborted"))
            return None
        return self._finish(req, "abort", None)

    def fail(self, seq: Sequence, error: str) -> StreamDelta:
        """End a request whose computation raised: its final delta carries the error."""
        req = self.requests.pop(seq.request_id)
        self.scheduler.remove(seq)
        if req.on_pinned:
            req.on_pinned(RequestFailedError(error))
        delta = self._finish(req, "error", None)
        delta.error = error
        return delta

    def complete_pin(self, seq: Sequence, pin: Pin | Exception) -> None:
        """A pin's prefix is computed: hand its caller the Pin (or why pinning failed)."""
        req = self.requests.pop(seq.request_id)
        self.scheduler.finish(seq)
        seq.status = SequenceStatus.FINISHED
        req.on_pinned(pin)

    # -- steps ---------------------------------------------------------------------------------------
    def begin_step(self, out: SchedulerOutput) -> StepTrace | None:
        """Count a step about to run and stamp its newly admitted requests; returns its trace entry
        (None unless tracing), to which the step's finished requests are added."""
        self.num_steps += 1
        scheduled_at = time.monotonic()  # before the forward pass: queue time excludes compute
        for seq in out.admitted:
            if seq.first_scheduled_time is None:
                seq.first_scheduled_time = scheduled_at
        if self.trace is None:
            return None
        trace = StepTrace(self.num_steps, out.num_batched_tokens,
                          [(s.seq.request_id, s.num_new_tokens) for s in out.scheduled],
                          [s.request_id for s in out.admitted], [s.request_id for s in out.preempted])
        self.trace.append(trace)
        return trace

    def append(self, seq: Sequence, token: int, logprobs: dict | None, now: float,
               trace: StepTrace | None = None) -> StreamDelta | None:
        """A token sampled for `seq`: add it to the sequence's output, then post-process it."""
        seq.output_token_ids.append(token)
        return self.accept(seq, token, logprobs, now, trace)

    def accept(self, seq: Sequence, token: int, logprobs: dict | None, now: float,
               trace: StepTrace | None = None) -> StreamDelta | None:
        """Post-process `token`, already the last of `seq`'s output: stop checks, text, the delta.
        Finishing frees the request's blocks and drops its record; `trace` notes it."""
        req = self.requests[seq.request_id]
        params = seq.params
        self.num_generation_tokens_total += 1
        if logprobs is not None:
            seq.output_logprobs.append(logprobs)
        if seq.first_token_time is None:
            seq.first_token_time = now
        seq.last_token_time = now
        reason, stop_reason = None, None
        if seq.grammar is not None and not seq.grammar.accept_token(token):
            # The mask allows only tokens the grammar takes: reaching this is a bug, not the request's fault.
            return self.fail(seq, f"the grammar of structured_outputs rejected token {token}")
        is_eos = token in self.eos_token_ids and not params.ignore_eos
        if seq.grammar is not None and seq.grammar.is_terminated():
            # The grammar is complete (its stop token taken): the request ends cleanly, even with ignore_eos.
            reason, stop_reason = "stop", (token if token in params.stop_token_ids else None)
        elif token in params.stop_token_ids or is_eos:
            reason, stop_reason = "stop", (token if token in params.stop_token_ids else None)
        elif req.detok is not None:
            stop_reason = req.detok.add(token)
            if stop_reason is not None:
                reason = "stop"
        if reason is None and (seq.num_output_tokens >= (params.max_tokens or self.max_model_len)
                               or seq.num_tokens >= self.max_model_len):
            reason = "length"
        if reason is not None:
            self.scheduler.finish(seq)
            del self.requests[seq.request_id]
            if trace is not None:
                trace.finished.append(seq.request_id)
            return self._finish(req, reason, stop_reason, [token], logprobs)
        text = req.detok.delta(False) if req.detok else ""
        return self._delta(req, text, [token], False, None, None, logprobs)

    def _finish(self, req: RequestState, reason: str, stop_reason, token_ids: list[int] | None = None,
                logprobs: dict | None = None) -> StreamDelta:
        seq = req.seq
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason, seq.stop_reason = reason, stop_reason
        seq.finish_time = time.monotonic()
        text = req.detok.delta(True) if req.detok else ""
        return self._delta(req, text, token_ids or [], True, reason, stop_reason, logprobs)

    @staticmethod
    def _delta(req: RequestState, text: str, token_ids: list[int], finished: bool, reason, stop_reason,
               logprobs) -> StreamDelta:
        seq = req.seq
        first = seq.num_output_tokens <= 1
        return StreamDelta(
            request_id=seq.request_id, text=text, token_ids=token_ids, finished=finished,
            finish_reason=reason, num_prompt_tokens=seq.num_prompt_tokens,
            num_cached_tokens=seq.num_cached_tokens, num_output_tokens=seq.num_output_tokens,
            stop_reason=stop_reason, logprobs=[logprobs] if logprobs else None,
            # The timings are only needed on a request's first and last delta: skip the dict otherwise.
            metrics=({"arrival": seq.arrival_time, "first_scheduled": seq.first_scheduled_time,
                      "first_token": seq.first_token_time, "last_token": seq.last_token_time,
                      "finished": seq.finish_time, "num_preemptions": seq.num_preemptions}
                     if finished or first else {}),
            prompt_logprobs=seq.prompt_logprobs if first else None)
