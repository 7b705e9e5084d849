"""Overlapped decode: the host schedules and stages step N+1 while the GPU computes step N.

A synchronous decode step waits for its sampled tokens, then post-processes them, schedules and stages
the next batch in Python, and only then launches it: the GPU idles for that host time. Here step N+1
is launched before N's tokens are read back. Its input tokens come from N's argmax on the device, each
running sequence holding a placeholder for the token being computed. A sequence that N finishes (EOS, a
stop string, max_tokens) has run one wasted step in N+1, which is dropped; its blocks are freed at
once, which is safe because every later kernel that reuses them runs after N+1 on the same stream.

Only batches that can run this way do: pure greedy decodes (no penalties, logprobs or min_tokens), no
request waiting, no pins, and enough free blocks for every sequence's next token. Anything else drains
the step in flight first and runs synchronously.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

from .scheduler import SchedulerOutput
from .sequence import Sequence

if TYPE_CHECKING:
    from .engine import LLMEngine
    from .outputs import StreamDelta

PLACEHOLDER = -1  # an output token still being computed on the device


class OverlappedDecode:
    def __init__(self, engine: "LLMEngine"):
        self.engine = engine
        self.graphs = engine.runner.graphs
        self.inflight: tuple[SchedulerOutput, torch.Tensor, torch.Tensor, torch.cuda.Event] | None = None

    # -- when -------------------------------------------------------------------------------------------
    def _eligible(self, seq: Sequence) -> bool:
        p = seq.params
        return (seq.pin_key is None and seq.num_computed_tokens == seq.num_tokens - 1 and p.temperature == 0
                and not p.uses_penalties and not p.uses_token_rules and p.logprobs is None
                and p.min_tokens == 0)

    def _can_overlap(self) -> bool:
        e = self.engine
        sched, bm = e.scheduler, e.block_manager
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
        if not self._can_overlap():
            return self._drain() if self.inflight is not None else None
        e = self.engine
        out = e.scheduler.schedule()
        if out.is_empty:
            return self._drain() if self.inflight is not None else []
        if not (self.graphs.can_run(out) and all(s.num_new_tokens == 1 for s in out.scheduled)):
            deltas = self._drain() if self.inflight is not None else []
            out.scheduled = [s for s in out.scheduled if s.seq.request_id in e.requests]
            return deltas + (e.run_step(out) if out.scheduled else [])
        feed = None
        if self.inflight is not None:
            prev = {id(s.seq): i for i, s in enumerate(self.inflight[0].scheduled)}
            index = [prev.get(id(s.seq), -1) if s.seq.output_token_ids[-1:] == [PLACEHOLDER] else -1
                     for s in out.scheduled]
            feed = (self.inflight[1], index)
        logits = self.graphs.run(out, feed)
        tokens = logits.argmax(dim=-1)  # [n] on the device: the next step's inputs
        host_tokens, ready = self._copy_to_host(tokens)
        e.num_steps += 1
        e.last_step_decode_only = True
        for s in out.scheduled:
            s.seq.num_computed_tokens += 1
            s.seq.output_token_ids.append(PLACEHOLDER)
        deltas = self._complete(self.inflight) if self.inflight is not None else []
        self.inflight = (out, tokens, host_tokens, ready)
        if not e.scheduler.has_work():  # every request ended with the last step: the one in flight is waste
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
        """Read a finished step's tokens back and post-process them as a normal step would."""
        out, _, host_tokens, ready = inflight
        ready.synchronize()
        e = self.engine
        now = time.monotonic()
        deltas = []
        for s, token in zip(out.scheduled, host_tokens.tolist()):
            seq = s.seq
            req = e.requests.get(seq.request_id)
            if req is None or req.seq is not seq:  # aborted or finished meanwhile
                continue
            index = s.start + 1 - seq.num_prompt_tokens  # where this step's token goes
            has_next = len(seq.output_token_ids) > index + 1  # the step now in flight holds one more
            if has_next:
                seq.output_token_ids.pop()
            seq.output_token_ids[index] = token
            if seq.num_computed_tokens // e.block_manager.block_size > seq.num_committed_blocks:
                e.block_manager.commit(seq)
            delta = e.accept(req, (token, None), now)
            if delta is not None:
                deltas.append(delta)
            if has_next and not (delta is not None and delta.finished):
                seq.output_token_ids.append(PLACEHOLDER)
        return deltas
