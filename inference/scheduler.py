"""Scheduler: continuous batching by tokens, with chunked prefill, preemption and fair admission.

Every step: running sequences first (each decode needs one token; a prompt being prefilled in chunks
takes what is left of its prompt), then waiting sequences admitted into the leftover token budget.
When blocks run out, the newest running sequence is preempted (its blocks go back to the pool, its
full blocks stay cached, so its recompute is mostly prefix hits). Waiting requests are admitted
tenant by tenant in deficit round robin on prompt tokens, so one tenant's burst cannot starve another.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .block_manager import BlockManager
from .sequence import Sequence, SequenceStatus


@dataclass
class ScheduledSeq:
    seq: Sequence
    start: int  # first position computed this step (= num_computed_tokens before the step)
    num_new_tokens: int  # tokens whose K/V this step computes
    sample: bool  # the step reaches the sequence's last token: its next token is sampled


@dataclass
class SchedulerOutput:
    """What one step computes. The model runner reads this and the sequences' tokens and block tables."""

    scheduled: list[ScheduledSeq] = field(default_factory=list)  # running ones first, then admitted
    num_batched_tokens: int = 0
    preempted: list[Sequence] = field(default_factory=list)  # sent back to waiting this step
    admitted: list[Sequence] = field(default_factory=list)  # joined the running set this step

    @property
    def is_empty(self) -> bool:
        return not self.scheduled


class Scheduler:
    def __init__(self, block_manager: BlockManager, max_num_seqs: int, max_num_batched_tokens: int):
        self.block_manager = block_manager
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.quantum = max(block_manager.block_size, max_num_batched_tokens // 4)
        self.running: list[Sequence] = []  # oldest first: the newest is preempted first
        self.waiting: dict[str | None, deque[Sequence]] = {}
        self.turns: deque[str | None] = deque()  # tenants with waiting requests, in DRR order
        self.deficit: dict[str | None, int] = {}
        self.num_preemptions = 0

    # -- queues ------------------------------------------------------------------------------------
    @property
    def num_waiting(self) -> int:
        return sum(len(q) for q in self.waiting.values())

    @property
    def num_running(self) -> int:
        return len(self.running)

    def has_work(self) -> bool:
        return bool(self.running or self.turns)

    def add(self, seq: Sequence, front: bool = False) -> None:
        queue = self.waiting.get(seq.tenant)
        if queue is None:
            queue = self.waiting[seq.tenant] = deque()
            self.deficit[seq.tenant] = 0
            if front:
                self.turns.appendleft(seq.tenant)
            else:
                self.turns.append(seq.tenant)
        queue.appendleft(seq) if front else queue.append(seq)

    def _pop_waiting(self, tenant: str | None) -> None:
        queue = self.waiting[tenant]
        queue.popleft()
        if not queue:
            del self.waiting[tenant]
            del self.deficit[tenant]
            self.turns.remove(tenant)

    def remove(self, seq: Sequence) -> bool:
        """Take a sequence out of the scheduler (abort) and free its blocks."""
        if seq in self.running:
            self.running.remove(seq)
        else:
            queue = self.waiting.get(seq.tenant)
            if queue is None or seq not in queue:
                return False
            queue.remove(seq)
            if not queue:
                del self.waiting[seq.tenant]
                del self.deficit[seq.tenant]
                self.turns.remove(seq.tenant)
        self.block_manager.free(seq)
        return True

    def finish(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.block_manager.free(seq)

    # -- one step ------------------------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        budget = self.max_num_batched_tokens
        for seq in list(self.running):
            if budget == 0:
                break
            if seq.status is not SequenceStatus.RUNNING:  # preempted earlier in this loop
                continue
            n = min(seq.num_tokens - seq.num_computed_tokens, budget)
            if n <= 0:
                continue
            # Most decode steps fit in the sequence's last block: no allocation, no quota check.
            if (seq.num_computed_tokens + n > len(seq.block_table) * self.block_manager.block_size
                    and not self._make_room(seq, n, out)):
                continue
            out.scheduled.append(ScheduledSeq(seq, seq.num_computed_tokens, n,
                                              seq.num_computed_tokens + n == seq.num_tokens))
            budget -= n
        if not out.preempted:
            budget = self._admit(budget, out)
        out.num_batched_tokens = self.max_num_batched_tokens - budget
        return out

    def _make_room(self, seq: Sequence, num_new_tokens: int, out: SchedulerOutput) -> bool:
        """Allocate blocks for a running sequence, preempting the newest ones if needed."""
        bm = self.block_manager
        while True:
            needed = bm.num_blocks_needed(seq, num_new_tokens)
            within_quota = bm.tenant_allows(seq, needed) or self._only_running_of_tenant(seq)
            if needed <= bm.pool.num_free and within_quota:
                bm.allocate(seq, num_new_tokens)
                return True
            if not within_quota:
                # Over its tenant's quota: preempt that tenant's newest request, never another's.
                victim = next(s for s in reversed(self.running) if s.tenant == seq.tenant)
            else:
                victim = self.running[-1]
            self._preempt(victim, out)
            if victim is seq:
                return False

    def _only_running_of_tenant(self, seq: Sequence) -> bool:
        return not any(s.tenant == seq.tenant and s is not seq for s in self.running)

    def _preempt(self, seq: Sequence, out: SchedulerOutput) -> None:
        self.running.remove(seq)
        self.block_manager.free(seq)  # its full blocks were committed: they stay cached
        seq.num_computed_tokens = 0
        seq.status = SequenceStatus.WAITING
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.add(seq, front=True)
        out.preempted.append(seq)

    def _admit(self, budget: int, out: SchedulerOutput) -> int:
        bm = self.block_manager
        blocked: set[str | None] = set()  # tenants at their quota this step
        while budget > 0 and len(self.running) < self.max_num_seqs and len(blocked) < len(self.turns):
            tenant = self.turns[0]
            if tenant in blocked:
                self.turns.rotate(-1)
                continue
            seq = self.waiting[tenant][0]
            if not seq.block_table:
                bm.take_cached_prefix(seq)
            n = min(seq.num_tokens - seq.num_computed_tokens, budget)
            cost = n
            if self.deficit[tenant] < cost and len(self.turns) > 1:
                self.deficit[tenant] += self.quantum
                self.turns.rotate(-1)
                continue
            needed = bm.num_blocks_needed(seq, n)
            # A tenant with nothing running may always start one request, whatever its quota.
            over_quota = not bm.tenant_allows(seq, needed) and any(
                s.tenant == tenant for s in self.running)
            if over_quota or needed > bm.pool.num_free:
                # Hand the prefix hit back: a waiting request holds no blocks between steps.
                bm.free(seq)
                seq.num_computed_tokens = 0
                if over_quota:
                    blocked.add(tenant)
                    continue
                break  # out of blocks: admit nothing more this step
            if not seq.admitted_once:
                seq.num_cached_tokens = min(seq.num_computed_tokens, seq.num_prompt_tokens)
                bm.record_query(seq.num_prompt_tokens, seq.num_cached_tokens, seq.tenant)
            bm.allocate(seq, n)
            self.deficit[tenant] -= cost
            self._pop_waiting(tenant)
            seq.status = SequenceStatus.RUNNING
            seq.admitted_once = True
            self.running.append(seq)
            out.admitted.append(seq)
            out.scheduled.append(ScheduledSeq(seq, seq.num_computed_tokens, n,
                                              seq.num_computed_tokens + n == seq.num_tokens))
            budget -= n
        return budget
