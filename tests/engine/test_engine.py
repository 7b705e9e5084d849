"""The engine on a real model: continuous batching, paging, preemption, aborts, prefix reuse."""
import pytest

from inference import LLM, SamplingParams
from inference.errors import InvalidRequestError, PromptTooLongError

GREEDY = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)


@pytest.fixture(scope="module")
def tiny(tiny_llama_path):
    return LLM(model=str(tiny_llama_path), progress=False, device="cpu")


def prompts(n, length=20, base=300):
    return [list(range(base + 50 * i, base + 50 * i + length + i)) for i in range(n)]


def run_alone(llm, ps, params):
    return [llm.generate([p], params)[0].outputs[0].token_ids for p in ps]


def test_continuous_batching_admits_waiting_requests_while_a_long_one_runs(tiny_llama_path):
    llm = LLM(model=str(tiny_llama_path), progress=False, device="cpu", max_num_seqs=2)
    engine = llm.engine
    engine.trace = []
    engine.add_request("long", list(range(10, 30)), SamplingParams(temperature=0, max_tokens=60, ignore_eos=True))
    for i in range(3):
        engine.add_request(f"short{i}", list(range(40 + i, 50 + i)),
                           SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))
    while engine.has_unfinished():
        engine.step()
    finished_at = {rid: t.step for t in engine.trace for rid in t.finished}
    admitted_at = {rid: t.step for t in engine.trace for rid in t.admitted}
    assert finished_at["short0"] < finished_at["long"]
    # short1 waited for a slot and joined the step right after short0 finished, long still running.
    assert admitted_at["short1"] == finished_at["short0"] + 1
    assert admitted_at["short2"] == finished_at["short1"] + 1 < finished_at["long"]
    assert all(len(t.scheduled) <= 2 for t in engine.trace)
    assert engine.block_manager.pool.num_free == engine.block_manager.pool.num_blocks


def test_sequences_span_many_blocks_and_no_block_leaks(tiny):
    ps = prompts(4, length=37)
    outs = tiny.generate(ps, SamplingParams(temperature=0, max_tokens=30, ignore_eos=True))
    assert all(len(o.outputs[0].token_ids) == 30 for o in outs)
    pool = tiny.engine.block_manager.pool
    assert pool.num_free == pool.num_blocks and sum(pool.ref_cnt) == 0


def test_small_pool_preempts_and_outputs_match_running_alone(tiny_llama_path):
    # 12 blocks of 16 tokens for 6 requests that each grow to 2-3 blocks: they cannot all fit.
    llm = LLM(model=str(tiny_llama_path), progress=False, device="cpu", num_kv_blocks=12)
    ps = prompts(6, length=20)
    params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    batched = [o.outputs[0].token_ids for o in llm.generate(ps, params)]
    assert llm.engine.scheduler.num_preemptions > 0
    assert batched == run_alone(llm, ps, params)
    pool = llm.engine.block_manager.pool
    assert pool.num_free == pool.num_blocks


def test_abort_frees_blocks_at_once(tiny):
    engine = tiny.engine
    engine.add_request("a", list(range(500, 540)), SamplingParams(max_tokens=100, ignore_eos=True))
    engine.add_request("b", list(range(600, 640)), SamplingParams(max_tokens=100, ignore_eos=True))
    for _ in range(3):
        engine.step()
    assert engine.block_manager.pool.num_used > 0
    final = engine.abort("a")
    assert final.finished and final.finish_reason == "abort"
    engine.abort("b")
    assert engine.abort("unknown") is None
    assert not engine.has_unfinished()
    assert engine.block_manager.pool.num_used == 0


def test_second_request_with_same_system_prompt_computes_only_new_tokens(tiny):
    engine = tiny.engine
    system = list(range(1000, 1000 + 64))  # 4 full blocks
    first = tiny.generate([system + [5, 6, 7]], GREEDY)[0]
    before = engine.num_prompt_tokens_total
    second = tiny.generate([system + [8, 9, 10, 11]], GREEDY)[0]
    assert second.num_cached_tokens == 64
    assert engine.num_prompt_tokens_total - before == 4  # only the question was computed
    assert first.num_cached_tokens == 0


def test_outputs_are_identical_with_and_without_prefix_caching(tiny_llama_path):
    system = list(range(2000, 2000 + 40))
    ps = [system + list(range(3000 + 10 * i, 3005 + 10 * i)) for i in range(4)]
    cached = LLM(model=str(tiny_llama_path), progress=False, device="cpu")
    uncached = LLM(model=str(tiny_llama_path), progress=False, device="cpu", enable_prefix_caching=False)
    a = [o.outputs[0].token_ids for o in cached.generate(ps, GREEDY)]
    a2 = [o.outputs[0].token_ids for o in cached.generate(ps, GREEDY)]  # now all prefix hits
    b = [o.outputs[0].token_ids for o in uncached.generate(ps, GREEDY)]
    assert a == b == a2
    assert cached.engine.block_manager.num_hit_tokens > 0
    assert uncached.engine.block_manager.num_hit_tokens == 0


def test_a_pin_computed_beside_a_chat_with_its_prompt_survives_a_flood(tiny_llama_path):
    """The platform pins a tenant's new system prompt while an employee's chat with that prompt is
    already queued: both compute the same blocks in one step, the chat's committed first."""
    engine = LLM(model=str(tiny_llama_path), progress=False, device="cpu", num_kv_blocks=48).engine
    system = list(range(300, 364))  # 4 blocks
    two = SamplingParams(temperature=0, max_tokens=2, ignore_eos=True)
    engine.trace = []
    engine.add_request("chat", system + [5, 6, 7], two, "t")
    pins = []
    engine.add_pin("sys", system, "t", pins.append)
    while engine.has_unfinished():
        engine.step()
    assert engine.trace[0].scheduled == [("chat", 67), (engine.trace[0].scheduled[1][0], 64)]  # one step
    assert pins[0].num_tokens == 64
    evictions = engine.block_manager.pool.num_evictions
    for i in range(30):  # unrelated prompts of the same tenant cycle through every unpinned block
        engine.add_request(f"flood{i}", list(range(1000 + 90 * i, 1080 + 90 * i)), two, "t")
        while engine.has_unfinished():
            engine.step()
    assert engine.block_manager.pool.num_evictions - evictions >= 48 - 4
    engine.add_request("later", system + [8, 9], two, "t")
    cached = []
    while engine.has_unfinished():
        cached += [d.num_cached_tokens for d in engine.step()]
    assert cached[-1] == 64


def test_tenants_do_not_share_cached_blocks(tiny):
    engine = tiny.engine
    system = list(range(4000, 4000 + 48))
    tiny.generate([system + [1, 2]], GREEDY, tenant="acme")
    other = tiny.generate([system + [1, 2]], GREEDY, tenant="globex")[0]
    same = tiny.generate([system + [3, 4]], GREEDY, tenant="acme")[0]
    assert other.num_cached_tokens == 0
    assert same.num_cached_tokens == 48
    assert engine.block_manager.pool.num_used == 0


def test_bad_requests_are_rejected_with_the_field(tiny):
    with pytest.raises(InvalidRequestError) as e:
        tiny.generate([[]], GREEDY)
    assert e.value.field == "prompt"
    with pytest.raises(InvalidRequestError, match="token ids"):
        tiny.generate([[10**7]], GREEDY)
    vocab = tiny.engine.model_args.vocab_size
    for bad in ([5, -1, 7], [5, vocab], [1.5, 2], ["3"], [2**64]):  # negative, >= vocab, not ints, too big
        with pytest.raises(InvalidRequestError, match="token ids"):
            tiny.generate([bad], GREEDY)
    assert len(tiny.engine.validate([0, vocab - 1], GREEDY)) == 2  # both ends of the vocab are fine
    with pytest.raises(PromptTooLongError):
        tiny.generate([list(range(600))], GREEDY)  # the tiny model's context is 512
    assert not tiny.engine.has_unfinished()


def test_generation_stops_at_the_context_end(tiny):
    out = tiny.generate([list(range(1, 500))], SamplingParams(temperature=0, max_tokens=100, ignore_eos=True))[0]
    assert out.outputs[0].finish_reason == "length"
    assert len(out.outputs[0].token_ids) == 512 - 499


def test_a_request_that_breaks_its_step_fails_alone(tiny):
    engine = tiny.engine
    params = SamplingParams(temperature=0, max_tokens=5, ignore_eos=True)
    good = engine.add_request("good", list(range(10, 30)), params)
    bad = engine.add_request("bad", list(range(40, 60)), params)
    bad.prompt_token_ids[3] = 10**7  # forced past validation: the embedding lookup raises
    deltas = []
    while engine.has_unfinished():
        deltas += engine.step()
    by_id = {d.request_id: d for d in deltas if d.finished}
    assert by_id["bad"].finish_reason == "error" and "Index" in by_id["bad"].error
    assert by_id["good"].finish_reason == "length" and by_id["good"].num_output_tokens == 5
    assert good.output_token_ids == tiny.generate([list(range(10, 30))], params)[0].outputs[0].token_ids
    assert engine.block_manager.pool.num_used == 0


def test_stats_count_prefix_cache_hits_per_tenant(tiny):
    engine = tiny.engine
    system = list(range(1400, 1400 + 64))  # 4 full blocks
    params = SamplingParams(max_tokens=2, ignore_eos=True)

    def run(request_id, tenant, tail):
        engine.add_request(request_id, system + tail, params, tenant=tenant)
        while engine.has_unfinished():
            engine.step()

    def counts(tenant):  # the engine is the module's: other tests' requests counted too
        t = engine.stats()["per_tenant"].get(tenant, {})
        return t.get("prefix_cache_queries", 0), t.get("prefix_cache_hits", 0)

    before = {t: counts(t) for t in ("acme", "globex")}
    run("a1", "acme", [5, 6])
    run("a2", "acme", [7, 8, 9])  # the system prompt's 64 tokens come from acme's cache
    run("g1", "globex", [5, 6])  # the same prompt in another tenant: no hit (nothing is shared)
    grew = {t: tuple(a - b for a, b in zip(counts(t), before[t])) for t in ("acme", "globex")}
    assert grew["acme"] == (66 + 67, 64)
    assert grew["globex"] == (66, 0)
