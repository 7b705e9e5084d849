"""Scheduler in isolation: token budgets, chunked prefill, preemption, fairness and quotas."""
from inference.block_manager import BlockManager
from inference.sampling_params import SamplingParams
from inference.scheduler import Scheduler
from inference.sequence import Sequence

BS = 4


def seq(rid, n_prompt, tenant=None, max_tokens=8):
    return Sequence(rid, list(range(1, n_prompt + 1)), SamplingParams(max_tokens=max_tokens), tenant)


def run_step(sched):
    """Do what the engine does after the model ran: advance, commit, append a token, finish."""
    out = sched.schedule()
    for s in out.scheduled:
        s.seq.num_computed_tokens += s.num_new_tokens
        sched.block_manager.commit(s.seq)
        if s.sample:
            s.seq.output_token_ids.append(7)
            if s.seq.num_output_tokens >= s.seq.params.max_tokens:
                sched.finish(s.seq)
    return out


def test_long_prompt_is_prefilled_in_chunks_while_decodes_continue():
    bm = BlockManager(64, BS)
    sched = Scheduler(bm, max_num_seqs=8, max_num_batched_tokens=16)
    short = seq("short", 3, max_tokens=20)
    sched.add(short)
    run_step(sched)
    sched.add(seq("long", 40))
    out = run_step(sched)
    by_id = {s.seq.request_id: s for s in out.scheduled}
    assert by_id["short"].num_new_tokens == 1  # the decode goes first
    assert by_id["long"].num_new_tokens == 15 and not by_id["long"].sample  # a chunk of the prompt
    out = run_step(sched)
    assert {s.seq.request_id: s.num_new_tokens for s in out.scheduled} == {"short": 1, "long": 15}
    out = run_step(sched)
    assert {s.seq.request_id: s.num_new_tokens for s in out.scheduled} == {"short": 1, "long": 10}
    assert [s.sample for s in out.scheduled] == [True, True]


def test_waiting_request_joins_as_soon_as_a_slot_frees():
    bm = BlockManager(64, BS)
    sched = Scheduler(bm, max_num_seqs=2, max_num_batched_tokens=64)
    sched.add(seq("a", 4, max_tokens=2))
    sched.add(seq("b", 4, max_tokens=10))
    sched.add(seq("c", 4, max_tokens=2))
    first = run_step(sched)
    assert [s.seq.request_id for s in first.scheduled] == ["a", "b"]
    run_step(sched)  # a finishes here (2 tokens)
    third = run_step(sched)
    assert "c" in [s.request_id for s in third.admitted]


def test_preemption_when_blocks_run_out_then_everything_completes():
    bm = BlockManager(6, BS)  # 24 token slots for three 8-token prompts that each grow to 16
    sched = Scheduler(bm, max_num_seqs=8, max_num_batched_tokens=64)
    seqs = [seq(f"s{i}", 8, max_tokens=8) for i in range(3)]
    for s in seqs:
        sched.add(s)
    preempted = []
    for _ in range(100):
        if not sched.has_work():
            break
        preempted += [s.request_id for s in run_step(sched).preempted]
    assert not sched.has_work()
    assert preempted and preempted[0] == "s2"  # the newest goes first
    assert all(s.num_output_tokens == 8 for s in seqs)
    assert bm.pool.num_free == 6


def test_preempted_request_gets_its_cached_prefix_back():
    bm = BlockManager(8, BS)
    sched = Scheduler(bm, max_num_seqs=8, max_num_batched_tokens=64)
    a, b = seq("a", 12, max_tokens=30), seq("b", 12, max_tokens=30)
    sched.add(a)
    sched.add(b)
    while not b.num_preemptions:
        run_step(sched)
    # b was sent back; its full blocks stay cached, so readmission starts from them, not from zero.
    sched.finish(a)
    out = run_step(sched)
    entry = next(s for s in out.scheduled if s.seq is b)
    assert entry.start > 0


def test_one_tenants_burst_does_not_starve_another():
    bm = BlockManager(1024, BS)
    sched = Scheduler(bm, max_num_seqs=64, max_num_batched_tokens=64)
    for i in range(40):
        sched.add(seq(f"burst{i}", 30, tenant="burst", max_tokens=50))
    sched.add(seq("quiet", 30, tenant="quiet", max_tokens=50))
    admitted = []
    for _ in range(3):
        admitted += [s.request_id for s in run_step(sched).admitted]
    assert "quiet" in admitted
    assert admitted.index("quiet") <= 3


def test_tenant_quota_holds_under_a_burst():
    bm = BlockManager(100, BS, tenant_max_blocks=10)
    sched = Scheduler(bm, max_num_seqs=64, max_num_batched_tokens=256)
    for i in range(20):
        sched.add(seq(f"burst{i}", 10, tenant="burst", max_tokens=20))
    sched.add(seq("other", 10, tenant="other", max_tokens=20))
    peak = 0
    for _ in range(200):
        if not sched.has_work():
            break
        run_step(sched)
        peak = max(peak, bm.pool.num_used_by_tenant["burst"])
    assert not sched.has_work()  # the burst still completes, within its quota
    assert peak <= 10
    assert bm.pool.num_free == 100
