"""Tensor parallelism on CPU processes (gloo, 2 ranks, fp32): the same tokens as one rank.

Each test that starts a 2-rank engine shuts it down before the next starts one (a process holds one
process group at a time). A worker that raises logs its traceback: expected in the failure case.
"""
import asyncio
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from inference import LLM, AsyncLLM, EngineConfig, LLMEngine, SamplingParams
from inference.errors import EngineDeadError, InvalidRequestError
from inference.models import ModelArgs

GREEDY = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
REPO = Path(__file__).resolve().parents[2]


def tokens(outputs):
    return [o.outputs[0].token_ids for o in outputs]


def tp_workers_running():
    return [p for p in multiprocessing.active_children() if p.name.startswith("pagoda-tp")]


def run_until_done(engine):
    deltas = []
    while engine.has_unfinished():
        deltas += engine.step()
    return deltas


def workload(llm):
    """Everything the runner must mirror on the workers; returns what came out, to compare."""
    engine = llm.engine
    bm = engine.block_manager
    got = {}
    # Six prompts of 20..35 tokens in 12 blocks, 32 tokens a step: chunked prefills beside decodes,
    # and preemptions (recomputed from cached blocks).
    prompts = [list(range(300 + 50 * i, 320 + 50 * i + 3 * i)) for i in range(6)]
    got["batch"] = tokens(llm.generate(prompts, SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)))
    got["preempted"] = engine.scheduler.num_preemptions > 0
    # A pinned prefix (a pin step samples nothing), then two requests that start from it.
    system = list(range(1000, 1032))
    pins = []
    engine.add_pin("sys", system, None, pins.append)
    run_until_done(engine)
    behind = llm.generate([system + [5, 6, 7], system + list(range(8, 20))], GREEDY)
    got["behind_pin"] = tokens(behind)
    got["cached"] = [o.num_cached_tokens for o in behind]
    assert engine.unpin("sys") and pins[0].num_tokens == 32
    # An abort mid-run: its blocks go to the next request at once.
    long = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True)
    engine.add_request("a", list(range(500, 540)), long)
    engine.add_request("b", list(range(600, 640)), long)
    deltas = [engine.step() for _ in range(3)]
    engine.abort("a")
    engine.add_request("c", list(range(700, 740)), long)
    deltas = [d for step in deltas for d in step] + run_until_done(engine)
    got["after_abort"] = {rid: [t for d in deltas if d.request_id == rid for t in d.token_ids] for rid in "bc"}
    # A request whose step raises (on every rank) fails alone; the others' outputs are unchanged.
    good = engine.add_request("good", list(range(10, 30)), GREEDY)
    bad = engine.add_request("bad", list(range(40, 60)), GREEDY)
    bad.prompt_token_ids[3] = 10**7  # forced past validation: the embedding lookup raises
    finished = {d.request_id: d for d in run_until_done(engine) if d.finished}
    got["bad"] = finished["bad"].finish_reason
    got["good"] = good.output_token_ids
    lp = llm.generate([prompts[0]], SamplingParams(temperature=0, max_tokens=4, logprobs=3))[0].outputs[0]
    got["logprobs"] = lp.logprobs
    assert bm.pool.num_free == bm.pool.num_blocks and sum(bm.pool.ref_cnt) == 0
    return got


def test_two_ranks_give_one_ranks_tokens_through_preemption_pins_prefix_hits_aborts_and_failures(
        tiny_llama_path):
    kwargs = dict(model=str(tiny_llama_path), progress=False, device="cpu", num_kv_blocks=12,
                  max_num_batched_tokens=32)
    want = workload(LLM(**kwargs))
    tp = LLM(tensor_parallel_size=2, **kwargs)
    try:
        assert tp.engine.runner.num_blocks == 12
        assert tp.engine.runner.kv_cache.shape[-2] == 1  # rank 0 holds 1 of the model's 2 KV heads
        got = workload(tp)
        assert got.pop("preempted") and want.pop("preempted")
        assert got["cached"] == [32, 32]
        assert got["bad"] == "error"
        lp_got, lp_want = got.pop("logprobs"), want.pop("logprobs")
        assert got == want
        for step_got, step_want in zip(lp_got, lp_want):
            assert step_got.keys() == step_want.keys()
            assert all(abs(step_got[t].logprob - step_want[t].logprob) < 1e-4 for t in step_got)
        # A worker that dies takes the engine down with a clear error, not a hang.
        tp.engine.runner.workers[0].kill()
        tp.engine.runner.workers[0].join(10)
        with pytest.raises(EngineDeadError, match="pagoda-tp-rank1"):
            tp.generate([[1, 2, 3]], GREEDY)
    finally:
        tp.shutdown()
    assert not tp_workers_running() and not dist.is_initialized()


def test_qwen2_with_qkv_bias_streams_the_same_tokens_and_shuts_down_cleanly(tmp_path, tiny_model_factory):
    path = tiny_model_factory(tmp_path / "qwen2", "qwen2")  # q/k/v biases are sharded with their rows
    prompts = [list(range(100, 100 + n)) for n in (3, 17, 40)]
    system = list(range(2000, 2024))
    config = dict(model=str(path), device="cpu", block_size=8, num_kv_blocks=64)
    one = LLM(progress=False, **config)
    want = tokens(one.generate(prompts + [system + [7, 8]], GREEDY))

    engine = AsyncLLM(EngineConfig(tensor_parallel_size=2, **config), progress=False, process=False)
    workers = engine.engine.runner.workers
    try:
        assert engine.pin_prefix("sys", system).num_tokens == 24

        async def stream(i, prompt):
            return [t async for d in engine.generate(f"r{i}", prompt, GREEDY) for t in d.token_ids]

        async def all_streams():
            return await asyncio.gather(*(stream(i, p) for i, p in enumerate(prompts + [system + [7, 8]])))

        assert asyncio.run(all_streams()) == want
        assert engine.stats()["prefix_cache_hits"] >= 24
    finally:
        engine.shutdown()
    assert [p.exitcode for p in workers] == [0]  # told to stop, and stopped
    assert not tp_workers_running() and not dist.is_initialized()


def test_bad_tensor_parallel_sizes_are_refused_before_any_process_starts(tiny_llama_path):
    with pytest.raises(InvalidRequestError) as e:
        EngineConfig(tensor_parallel_size=0)
    assert e.value.field == "tensor_parallel_size"
    assert EngineConfig(tensor_parallel_size=2, async_scheduling=True)  # accepted, and not used (one rank only)
    model = dict(model=str(tiny_llama_path), progress=False, device="cpu")
    with pytest.raises(InvalidRequestError, match=r"divide the model's num_heads \(4\)") as e:
        LLM(tensor_parallel_size=3, **model)
    assert e.value.field == "tensor_parallel_size"
    with pytest.raises(InvalidRequestError, match=r"num_kv_heads \(2\)"):
        LLM(tensor_parallel_size=4, **model)
    args = ModelArgs(vocab_size=128, hidden_size=32, intermediate_size=66, num_layers=1, num_heads=4,
                     num_kv_heads=4, head_dim=8, rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None,
                     max_position_embeddings=64, tie_word_embeddings=False, qkv_bias=False)
    with pytest.raises(InvalidRequestError, match=r"intermediate_size \(66\)"):
        LLMEngine(EngineConfig(device="cpu", tensor_parallel_size=4), progress=False, model_args=args)
    if not torch.cuda.is_available():
        with pytest.raises(InvalidRequestError, match="needs 2 GPUs; 0 are visible"):
            LLM(tensor_parallel_size=2, **{**model, "device": "cuda"})
    assert not tp_workers_running() and not dist.is_initialized()


def _exited(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")  # a zombie has exited; only its parent (gone) would reap it


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_exit_when_rank_0_is_killed():
    script = textwrap.dedent("""
        import os, signal
        from inference import EngineConfig, LLMEngine
        from inference.models import ModelArgs

        args = ModelArgs(vocab_size=128, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2,
                         num_kv_heads=2, head_dim=16, rms_norm_eps=1e-5, rope_theta=10000.0,
                         rope_scaling=None, max_position_embeddings=64, tie_word_embeddings=False,
                         qkv_bias=False)
        engine = LLMEngine(EngineConfig(device="cpu", tensor_parallel_size=2, num_kv_blocks=4),
                           progress=False, model_args=args)
        print(engine.runner.workers[0].pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no shutdown, no atexit: a crash
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env=env)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    pid = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 15
    while not _exited(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not _exited(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the worker outlived rank 0 by 15 s")
