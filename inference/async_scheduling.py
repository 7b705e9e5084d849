"""Async scheduling: the host schedules and stages decode step N+1 while the GPU computes step N.

A synchronous decode step waits for its sampled tokens, then post-processes them, schedules and stages
the next batch in Python, and only then launches it: the GPU idles for that host time. Here step N+1
is launched before N's tokens are read back. Its input tokens come from N's argmax on the device, each
running sequence holding a placeholder for the token being computed. A sequence that N finishes (EOS, a
stop string, max_tokens) has run one wasted step in N+1, which is dropped; its blocks are freed at
once, which is safe because every later kernel that reuses them runs after N+1 on the same stream.

Only batches that can run this way do: pure greedy decodes (no penalties, logprobs, min_tokens or
structured outputs, whose grammar must see token N before it masks N+1), no request waiting, no pins, and enough free blocks for every sequence's next token. Anything else drains
the step in flight first and runs synchronously (`LLMEngine.run_step`).

The tokens are post-processed by the engine's OutputProcessor, as a synchronous step's are, one step
late; each launched step is counted and traced there too.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

from .output_processor import StepTrace
from .scheduler import SchedulerOutput
from .sequence import Sequence

if TYPE_CHECKING:
    from .engine import LLMEngine
    from .outputs import StreamDelta

PLACEHOLDER = -1  # an output token still being computed on the device


class AsyncScheduling:
    """Steps `engine` with decode step N+1 launched before step N's tokens are read back.

    It drives the engine's parts, read once here: the scheduler, the block manager, the output
    processor, the runner's decode CUDA graphs, and `run_step` for the steps it cannot take.
    """

    def __init__(self, engine: "LLMEngine"):
        self.scheduler = engine.scheduler
        self.block_manager = engine.block_manager
        self.output_processor = engine.output_processor
        self.graphs = engine.runner.graphs
        self.run_step = engine.run_step
        # The step in flight: what it computes, its tokens on the device and on their way to the host,
        # the event that says they arrived, and its trace entry.
        self.inflight: tuple[SchedulerOutput, torch.Tensor, torch.Tensor, torch.cuda.Event,
                             StepTrace | None] | None = None

    # -- when -------------------------------------------------------------------------------------------
    def _eligible(self, seq: Sequence) -> bool:
        p = seq.params
        return (seq.pin_key is None and seq.num_computed_tokens == seq.num_tokens - 1 and p.temperature == 0
                and not p.uses_penalties and not p.uses_token_rules and p.logprobs is None
                and p.min_tokens == 0 and seq.grammar is None)

    def _can_launch_ahead(self) -> bool:
        sched, bm = self.scheduler, self.block_manager
        running = sched.running
        if sched.num_waiting or not running or len(running) > self.graphs.max_batch:
            return False
        if bm.tenant_max_blocks is not None or not all(self._eligible(s) for s in running):
            return False
        bs = bm.block_size
        needed = sum(1 for s in running if s.num_tokens > len(s.block_table) * bs)
        return needed <= bm.pool.num_free

    # -- one step -------------------------------------------------------------------------------------
    def step(self) -> list["StreamDelta"] | None:
        """Deltas of the step that completed, or None: run a normal synchronous step instead."""
        if not self._can_launch_ahead():
            return self._drain() if self.inflight is not None else None
        out = self.scheduler.schedule()
        if out.is_empty:
            return self._drain() if self.inflight is not None else []
        if not (self.graphs.can_run(out) and all(s.num_new_tokens == 1 for s in out.scheduled)):
            deltas = self._drain() if self.inflight is not None else []
            # The drain may have finished some of the scheduled requests.
            out.scheduled = [s for s in out.scheduled if self.output_processor.get(s.seq) is not None]
            out.num_batched_tokens = sum(s.num_new_tokens for s in out.scheduled)
            return deltas + (self.run_step(out) if out.scheduled else [])
        feed = None
        if self.inflight is not None:
            prev = {id(s.seq): i for i, s in enumerate(self.inflight[0].scheduled)}
            index = [prev.get(id(s.seq), -1) if s.seq.output_token_ids[-1:] == [PLACEHOLDER] else -1
                     for s in out.scheduled]
            feed = (self.inflight[1], index)
        trace = self.output_processor.begin_step(out)
        logits = self.graphs.run(out, feed)
        tokens = logits.argmax(dim=-1)  # [n] on the device: the next step's inputs
        host_tokens, ready = self._copy_to_host(tokens)
        for s in out.scheduled:
            s.seq.num_computed_tokens += 1
            s.seq.output_token_ids.append(PLACEHOLDER)
        deltas = self._complete(self.inflight) if self.inflight is not None else []
        self.inflight = (out, tokens, host_tokens, ready, trace)
        if not self.scheduler.has_work():  # every request ended with the last step: the one in flight is waste
            deltas += self._drain()
        return deltas

    @staticmethod
    def _copy_to_host(tokens: torch.Tensor):
        """Start copying the tokens to pinned host memory; returns (host tensor, event to wait on)."""
        host_tokens = torch.empty(tokens.shape, dtype=tokens.dtype, pin_memory=True)
        host_tokens.copy_(tokens, non_blocking=True)
        ready = torch.cuda.Event()
        ready.record()
        return host_tokens, ready

    def _drain(self) -> list["StreamDelta"]:
        inflight, self.inflight = self.inflight, None
        return self._complete(inflight)

    def _complete(self, inflight) -> list["StreamDelta"]:
        """Read a finished step's tokens back and post-process them as a synchronous step would."""
        out, _, host_tokens, ready, trace = inflight
        ready.synchronize()
        outputs, bm = self.output_processor, self.block_manager
        now = time.monotonic()
        deltas = []
        for s, token in zip(out.scheduled, host_tokens.tolist()):
            seq = s.seq
            if outputs.get(seq) is None:  # aborted or finished meanwhile
                continue
            index = s.start + 1 - seq.num_prompt_tokens  # where this step's token goes
            # The step now in flight holds one more placeholder: off the output while this token is
            # post-processed, so the length checks see the tokens known so far.
            has_next = len(seq.output_token_ids) > index + 1
            if has_next:
                seq.output_token_ids.pop()
            seq.output_token_ids[index] = token
            if seq.num_computed_tokens // bm.block_size > seq.num_committed_blocks:
                bm.commit(seq)
            delta = outputs.accept(seq, token, None, now, trace)
            if delta is not None:
                deltas.append(delta)
            if has_next and not (delta is not None and delta.finished):
                seq.output_token_ids.append(PLACEHOLDER)
        return deltas
