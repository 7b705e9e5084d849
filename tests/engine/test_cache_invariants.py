"""The engine's bookkeeping under random traffic: requests of several tenants sharing a few system
prompts, pins and re-pins, unpins, aborts, a small pool (evictions, preemptions, tenant quotas) and
chunked prefill. The model runner is replaced by one that records, for every KV slot, what it was
computed for, and checks that every slot a step reads holds its own sequence's tokens: a prefix hit
serves exactly the K/V its tokens would have, never another tenant's. After every step the block
counts add up; at the end every block is free again."""
import random

from inference import EngineConfig, SamplingParams
from inference.engine import LLMEngine
from inference.errors import InvalidRequestError, PinCapacityError, QueueFullError

BLOCK = 8
TENANTS = ["a", "b", "c"]


class RecordingRunner:
    """Stands in for ModelRunner.execute: no model, but the K/V of each slot is named by what it
    depends on (tenant, and every token up to its position)."""

    def __init__(self, engine: LLMEngine, rng: random.Random):
        self.engine, self.rng = engine, rng
        self.kv: dict[tuple[int, int], tuple] = {}  # (block, offset) -> (tenant, tokens[:pos + 1])
        self.slots_read = 0
        self.errors: list[AssertionError] = []

    def execute(self, out):
        try:
            return self._execute(out)
        except AssertionError as e:  # the engine would fail just that request: the test must see it
            self.errors.append(e)
            raise

    def _execute(self, out):
        results = []
        for s in out.scheduled:
            seq = s.seq
            tokens = tuple(seq.token_ids(0, s.start + s.num_new_tokens))
            assert len(seq.block_table) * BLOCK >= s.start + s.num_new_tokens, "a slot without a block"
            for pos in range(s.start):  # what attention reads: this sequence's own history
                slot = (seq.block_table[pos // BLOCK], pos % BLOCK)
                assert self.kv.get(slot) == (seq.tenant, tokens[:pos + 1]), (seq.request_id, pos)
                self.slots_read += 1
            for pos in range(s.start, s.start + s.num_new_tokens):
                self.kv[(seq.block_table[pos // BLOCK], pos % BLOCK)] = (seq.tenant, tokens[:pos + 1])
            results.append((self.rng.randrange(100, 200), None, None) if s.sample else None)
        return results


def check_counts(engine: LLMEngine) -> None:
    bm, pool, sched = engine.block_manager, engine.block_manager.pool, engine.scheduler
    holders = [0] * pool.num_blocks
    seqs = list(sched.running) + [s for q in sched.waiting.values() for s in q]
    for seq in seqs:
        for b in seq.block_table:
            holders[b] += 1
    for b, n in bm._pinned_refs.items():
        holders[b] += n
    assert pool.ref_cnt == holders
    assert set(pool.free_queue) == {b for b in range(pool.num_blocks) if holders[b] == 0}
    assert all(pool.block_hash[b] == h for h, b in pool.cached.items())
    for pin in bm.pins.values():  # pinned blocks are the ones later requests hit
        assert [pool.cached.get(h) for h in pin.block_hashes] == pin.block_ids
    used = {}
    for b in range(pool.num_blocks):
        if holders[b]:
            used[pool.owner[b]] = used.get(pool.owner[b], 0) + 1
    assert {t: n for t, n in pool.num_used_by_tenant.items() if n} == used
    if bm.tenant_max_blocks is not None:
        for seq in sched.running:  # a tenant with more than one running request keeps to its quota
            if sum(s.tenant == seq.tenant for s in sched.running) > 1:
                assert used.get(seq.tenant, 0) <= bm.tenant_max_blocks + bm.num_pinned_blocks


def test_random_traffic_keeps_the_cache_right_and_the_counts_whole(tiny_llama_path):
    runs = [run_traffic(tiny_llama_path, seed) for seed in range(12)]
    assert all(r["num_evictions"] > 0 for r in runs)
    assert sum(r["num_preemptions"] for r in runs) > 0 and sum(r["num_pins"] for r in runs) > 0


def run_traffic(tiny_llama_path, seed: int) -> dict:
    rng = random.Random(seed)
    engine = LLMEngine(EngineConfig(model=str(tiny_llama_path), device="cpu", block_size=BLOCK,
                                    num_kv_blocks=28, max_num_seqs=4, max_num_batched_tokens=48,
                                    max_pinned_fraction=0.3,
                                    tenant_max_blocks_fraction=0.5 if seed % 2 else None), progress=False)
    runner = RecordingRunner(engine, rng)
    engine.runner.execute = runner.execute
    shared = [[rng.randrange(300, 400) for _ in range(rng.choice([16, 20, 24]))] for _ in range(2)]
    systems = {t: [list(p) for p in shared] for t in TENANTS}  # the same prompts: still nothing shared
    pins_done, hits = [], 0
    for step in range(250):
        action = rng.random()
        tenant = rng.choice(TENANTS)
        try:
            if action < 0.35:
                prompt = rng.choice(systems[tenant]) + [rng.randrange(400, 500) for _ in range(rng.randrange(1, 12))]
                engine.add_request(f"r{step}", prompt, SamplingParams(max_tokens=rng.randrange(1, 40),
                                                                      ignore_eos=True), tenant)
            elif action < 0.42:
                which = rng.randrange(2)
                if rng.random() < 0.3:  # the prompt changes: a re-pin replaces the old pin
                    systems[tenant][which] = systems[tenant][which][:-4] + [rng.randrange(300, 400)] * 4
                engine.add_pin(f"{tenant}:{which}", systems[tenant][which], tenant, pins_done.append)
            elif action < 0.45:
                engine.unpin(f"{tenant}:{rng.randrange(2)}")
            elif action < 0.52 and engine.output_processor.requests:
                engine.abort(rng.choice(list(engine.output_processor.requests)))
        except (PinCapacityError, QueueFullError, InvalidRequestError):
            pass
        for d in engine.step():
            hits += d.num_cached_tokens if d.finished else 0
        assert not runner.errors, runner.errors[0]
        check_counts(engine)
    for rid in list(engine.output_processor.requests):
        engine.abort(rid)
    for key in list(engine.block_manager.pins):
        engine.unpin(key)
    check_counts(engine)
    assert engine.block_manager.pool.num_free == engine.block_manager.pool.num_blocks
    stats = engine.stats()
    print(f"\nseed {seed}: {hits} cached tokens, {runner.slots_read} slots read, {len(pins_done)} pins, "
          f"{stats['num_evictions']} evictions, {stats['num_preemptions']} preemptions")
    assert runner.slots_read > 0 and hits > 0, seed  # the traffic did hit the cache
    return {**stats, "num_pins": len(pins_done)}
