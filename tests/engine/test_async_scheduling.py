"""Async scheduling's bookkeeping (placeholders, one-step-late post-processing, wasted steps of
finished requests, aborts, the step trace) checked on the CPU: a stand-in for the CUDA graphs runs the
real model eagerly and feeds the tokens of the step in flight the way the device does."""
import pytest

from inference import LLM, SamplingParams
from inference.async_scheduling import PLACEHOLDER, AsyncScheduling
from inference.cuda_graphs import DecodeGraphs


class EagerGraphs:
    """DecodeGraphs' interface over the eager model: run(out, feed) -> logits."""

    max_batch = 64
    can_run = DecodeGraphs.can_run

    def __init__(self, runner):
        self.runner = runner

    def run(self, out, feed=None):
        input_ids, positions, meta, _ = self.runner.prepare_with_inputs(out, feed)
        ctx = self.runner.step_context(meta)
        return self.runner.model.compute_logits(self.runner.model(input_ids, positions, ctx))


class Ready:
    def synchronize(self):
        pass


@pytest.fixture
def async_sched(tiny_llama_path, monkeypatch):
    llm = LLM(model=str(tiny_llama_path), progress=False, device="cpu", num_kv_blocks=64)
    runner = llm.engine.runner

    def prepare_with_inputs(out, feed):
        ids = []
        for i, s in enumerate(out.scheduled):
            tok = s.seq.output_token_ids[-1] if s.seq.output_token_ids else s.seq.prompt_token_ids[-1]
            if tok == PLACEHOLDER:
                tok = int(feed[0][feed[1][i]])
            ids.append(tok)
        saved = [s.seq.output_token_ids[:] for s in out.scheduled]
        for s, tok in zip(out.scheduled, ids):  # let prepare() read real tokens
            if s.seq.output_token_ids:
                s.seq.output_token_ids[-1] = tok
        try:
            return runner.prepare(out)
        finally:
            for s, toks in zip(out.scheduled, saved):
                s.seq.output_token_ids[:] = toks

    runner.prepare_with_inputs = prepare_with_inputs
    runner.graphs = EagerGraphs(runner)
    engine = llm.engine
    engine.async_scheduling = AsyncScheduling(engine)
    monkeypatch.setattr(AsyncScheduling, "_copy_to_host", staticmethod(lambda t: (t.clone(), Ready())))
    return llm


def test_async_scheduling_gives_the_synchronous_tokens(async_sched, tiny_llama_path):
    prompts = [list(range(100 + 30 * i, 110 + 30 * i + i)) for i in range(5)]
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in (3, 9, 17, 30, 1)]
    got = [o.outputs[0].token_ids for o in async_sched.generate(prompts, params)]
    assert async_sched.engine.num_steps > 0
    reference = LLM(model=str(tiny_llama_path), progress=False, device="cpu")
    want = [o.outputs[0].token_ids for o in reference.generate(prompts, params)]
    assert got == want
    assert [len(g) for g in got] == [3, 9, 17, 30, 1]
    pool = async_sched.engine.block_manager.pool
    assert pool.num_free == pool.num_blocks
    assert async_sched.engine.async_scheduling.inflight is None


def test_stop_tokens_and_abort_while_a_step_is_in_flight(async_sched, tiny_llama_path):
    engine = async_sched.engine
    free_run = async_sched.generate([list(range(300, 320))], SamplingParams(temperature=0, max_tokens=12,
                                                                              ignore_eos=True))[0]
    stop_at = free_run.outputs[0].token_ids[5]
    out = async_sched.generate([list(range(300, 320))], SamplingParams(
        temperature=0, max_tokens=12, stop_token_ids=[stop_at]))[0].outputs[0]
    first = free_run.outputs[0].token_ids.index(stop_at)
    assert out.token_ids == free_run.outputs[0].token_ids[:first + 1] and out.finish_reason == "stop"
    engine.add_request("a", list(range(400, 420)), SamplingParams(temperature=0, max_tokens=50, ignore_eos=True))
    engine.add_request("b", list(range(500, 520)), SamplingParams(temperature=0, max_tokens=50, ignore_eos=True))
    for _ in range(6):
        engine.step()
    assert engine.async_scheduling.inflight is not None
    engine.abort("a")
    while engine.has_unfinished():
        engine.step()
    assert engine.async_scheduling.inflight is None
    assert engine.block_manager.pool.num_free == engine.block_manager.pool.num_blocks


def test_steps_launched_ahead_are_counted_and_traced(async_sched):
    engine = async_sched.engine
    engine.trace = []
    prompts = [list(range(200 + 40 * i, 220 + 40 * i + i)) for i in range(4)]
    lengths = (5, 12, 1, 20)
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in lengths]
    outs = async_sched.generate(prompts, params)
    trace = engine.trace
    assert len(trace) == engine.num_steps and [t.step for t in trace] == list(range(1, len(trace) + 1))
    assert sum(t.decode_only for t in trace) >= max(lengths) - 2  # the decode steps, most launched ahead
    assert engine.stats()["generation_tokens_total"] == sum(lengths)
    ids = [f"{o.request_id}.0" for o in outs]
    finished_at = {rid: t for t in trace for rid in t.finished}
    assert sorted(finished_at) == sorted(ids) and sum(len(t.finished) for t in trace) == len(ids)
    for rid, prompt, n in zip(ids, prompts, lengths):
        assert rid in dict(finished_at[rid].scheduled)  # noted on the step that computed its last token
        computed = sum(dict(t.scheduled).get(rid, 0) for t in trace)
        # Every token's K/V once, but the last; a step launched before the request finished adds one.
        assert computed in (len(prompt) + n - 1, len(prompt) + n)


def test_padding_rows_of_a_decode_graph_never_keep_a_placeholder_token():
    # An async-scheduled step stages the placeholder -1 in a row it then feeds on the device. When the batch
    # shrinks, that row becomes padding: left as -1, the graph's embedding lookup reads out of bounds
    # (seen on the H200 as a device-side assert).
    from types import SimpleNamespace

    import numpy as np

    from inference.cuda_graphs import stage_rows

    def row(token, pos):
        seq = SimpleNamespace(output_token_ids=[token], prompt_token_ids=[7], block_table=[3, 5])
        return SimpleNamespace(seq=seq, start=pos)

    host = np.full((4, 4 + 2), 99, dtype=np.int64)
    stage_rows(host, SimpleNamespace(scheduled=[row(PLACEHOLDER, 17), row(PLACEHOLDER, 18), row(11, 19)]),
               4, 16)
    assert host[:3, 0].tolist() == [PLACEHOLDER, PLACEHOLDER, 11]
    assert host[:3, 2].tolist() == [5 * 16 + 1, 5 * 16 + 2, 5 * 16 + 3]
    width = stage_rows(host, SimpleNamespace(scheduled=[row(12, 20)]), 4, 16)
    assert width == 2
    assert host[1:, 0].tolist() == [0, 0, 0] and host[1:, 1].tolist() == [0, 0, 0]
    assert host[1:, 2].tolist() == [-1, -1, -1] and host[1:, 3].tolist() == [0, 0, 0]
