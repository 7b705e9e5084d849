"""AsyncLLM: streaming from an event loop, abort, pins, a dead loop reported. `engine` runs the core in
a child process (as the server does); `threaded` runs it in a thread, for tests that reach inside it."""
import asyncio

import pytest

from inference import AsyncLLM, EngineConfig, SamplingParams
from inference.errors import EngineDeadError, InvalidRequestError, PinCapacityError


@pytest.fixture(scope="module")
def engine(tiny_llama_path):
    eng = AsyncLLM(EngineConfig(model=str(tiny_llama_path), device="cpu", num_kv_blocks=64))
    assert eng.engine is None and eng.core.process is not None  # the core runs in its own process
    yield eng
    eng.shutdown()


@pytest.fixture(scope="module")
def threaded(tiny_llama_path):
    eng = AsyncLLM(EngineConfig(model=str(tiny_llama_path), device="cpu", num_kv_blocks=64), process=False)
    yield eng
    eng.shutdown()


async def collect(engine, rid, prompt, params, tenant=None):
    return [d async for d in engine.generate(rid, prompt, params, tenant)]


async def test_concurrent_streams_each_get_their_own_tokens(engine):
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    prompts = [list(range(100 + 10 * i, 110 + 10 * i)) for i in range(4)]
    streams = await asyncio.gather(*(collect(engine, f"s{i}", p, params) for i, p in enumerate(prompts)))
    for deltas in streams:
        assert sum(len(d.token_ids) for d in deltas) == 8
        assert deltas[-1].finished and deltas[-1].finish_reason == "length"
        assert not any(d.finished for d in deltas[:-1])
    assert len({tuple(t for d in deltas for t in d.token_ids) for deltas in streams}) > 1
    assert engine.stats()["num_blocks_used"] == 0


async def test_leaving_a_stream_early_aborts_and_frees_blocks(engine):
    params = SamplingParams(temperature=0, max_tokens=200, ignore_eos=True)
    got = 0
    async for d in engine.generate("early", list(range(50, 90)), params):
        got += 1
        if got == 3:
            break
    for _ in range(100):
        if engine.stats()["num_running"] == 0:
            break
        await asyncio.sleep(0.02)
    stats = engine.stats()
    assert stats["num_running"] == 0 and stats["num_blocks_used"] == 0


async def test_abort_from_outside_ends_the_stream_with_abort(engine):
    params = SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)
    deltas = []

    async def consume():
        async for d in engine.generate("outside", list(range(60, 100)), params):
            deltas.append(d)

    task = asyncio.create_task(consume())
    while not deltas:
        await asyncio.sleep(0.01)
    engine.abort("outside")
    await asyncio.wait_for(task, 10)
    assert deltas[-1].finish_reason == "abort"
    assert engine.stats()["num_blocks_used"] == 0


async def test_bad_request_raises_before_streaming(engine):
    with pytest.raises(InvalidRequestError):
        await collect(engine, "bad", [], SamplingParams())


async def test_a_request_is_validated_once_before_it_is_queued(threaded, monkeypatch):
    """generate() refuses bad input in the caller's thread; the engine core then takes the prompt as
    checked (a 2,000-token prompt's check is on its TTFT's critical path)."""
    calls = []
    real = threaded.validate
    monkeypatch.setattr(threaded, "validate", lambda ids, params: calls.append(len(ids)) or real(ids, params))
    monkeypatch.setattr(threaded.engine, "validate", lambda ids, params: calls.append("core") or real(ids, params))
    deltas = await collect(threaded, "once", list(range(30, 70)), SamplingParams(temperature=0, max_tokens=2))
    assert calls == [40] and deltas[-1].finished and deltas[-1].num_prompt_tokens == 40


def test_pin_then_requests_hit_and_unpin(engine):
    system = list(range(3000, 3048))  # 3 blocks of 16
    info = engine.pin_prefix("tenant:acme", system, tenant="acme")
    assert (info.num_tokens, info.num_blocks) == (48, 3)
    assert engine.stats()["num_blocks_pinned"] == 3
    deltas = asyncio.run(collect(engine, "hit", system + [7, 8], SamplingParams(max_tokens=2), "acme"))
    assert deltas[-1].num_cached_tokens == 48
    other = asyncio.run(collect(engine, "miss", system + [7, 8], SamplingParams(max_tokens=2), "globex"))
    assert other[-1].num_cached_tokens == 0
    with pytest.raises(PinCapacityError):
        engine.pin_prefix("tenant:big", list(range(5000, 5000 + 16 * 13)), tenant="big")  # cap: 20% of 64
    assert engine.unpin_prefix("tenant:acme") and not engine.unpin_prefix("tenant:acme")
    assert engine.stats()["num_blocks_pinned"] == 0 and engine.stats()["num_blocks_used"] == 0


def test_shutdown_makes_requests_fail_clearly(tiny_llama_path):
    eng = AsyncLLM(EngineConfig(model=str(tiny_llama_path), device="cpu", num_kv_blocks=16))
    assert eng.is_alive()
    eng.shutdown()
    assert not eng.is_alive()
    with pytest.raises(EngineDeadError):
        asyncio.run(collect(eng, "late", [1, 2, 3], SamplingParams()))


async def test_a_failing_request_does_not_stop_the_loop(threaded):
    from inference.errors import RequestFailedError

    engine = threaded
    original = engine.engine.runner.execute
    calls = {"n": 0}

    def flaky(out):
        calls["n"] += 1
        if any(s.seq.request_id == "doomed" for s in out.scheduled):
            raise RuntimeError("forced failure")
        return original(out)

    engine.engine.runner.execute = flaky
    try:
        with pytest.raises(RequestFailedError, match="forced failure"):
            await collect(engine, "doomed", [1, 2, 3, 4], SamplingParams(max_tokens=3))
        ok = await collect(engine, "after", [5, 6, 7], SamplingParams(max_tokens=3, ignore_eos=True))
    finally:
        engine.engine.runner.execute = original
    assert ok[-1].finish_reason == "length" and engine.is_alive()
    assert engine.stats()["num_blocks_used"] == 0


# -- the engine core's process --------------------------------------------------------------------------
def _wait_gone(pid: int, timeout: float) -> bool:
    import os
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a child of this process lingers as a zombie until it is reaped
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return False


async def test_a_killed_core_ends_every_stream_with_a_clear_error(tiny_llama_path):
    import os
    import signal

    eng = AsyncLLM(EngineConfig(model=str(tiny_llama_path), device="cpu", num_kv_blocks=64))
    params = SamplingParams(temperature=0, max_tokens=10_000, ignore_eos=True)
    started = asyncio.Event()
    outcomes: list = []

    async def stream(i: int):
        try:
            async for _ in eng.generate(f"k{i}", list(range(40 + i, 60 + i)), params):
                started.set()
            outcomes.append("finished")
        except EngineDeadError as e:
            outcomes.append(str(e))

    tasks = [asyncio.create_task(stream(i)) for i in range(3)]
    await asyncio.wait_for(started.wait(), 30)
    os.kill(eng.core.process.pid, signal.SIGKILL)
    await asyncio.wait_for(asyncio.gather(*tasks), 10)
    assert outcomes == ["the engine process died (killed by signal 9)"] * 3
    assert not eng.is_alive() and "signal 9" in eng.error
    with pytest.raises(EngineDeadError):
        await collect(eng, "after", [1, 2, 3], SamplingParams())
    with pytest.raises(EngineDeadError):
        eng.pin_prefix("late", [1, 2, 3])
    assert eng.stats()["alive"] is False
    eng.shutdown()


def test_shutdown_stops_the_core_process(tiny_llama_path):
    eng = AsyncLLM(EngineConfig(model=str(tiny_llama_path), device="cpu", num_kv_blocks=16))
    pid = eng.core.process.pid
    eng.shutdown()
    assert eng.core.process.returncode == 0 and _wait_gone(pid, 1)


def test_a_core_whose_parent_died_exits_by_itself(tmp_path, tiny_llama_path):
    """A server killed with -9 runs no clean-up: its engine core must notice and exit on its own."""
    import os
    import signal
    import subprocess
    import sys

    script = tmp_path / "parent.py"
    script.write_text(
        "import sys, time\n"
        "from inference import AsyncLLM, EngineConfig\n"
        f"eng = AsyncLLM(EngineConfig(model={str(tiny_llama_path)!r}, device='cpu', num_kv_blocks=16), progress=False)\n"
        "print(eng.core.process.pid, flush=True)\n"
        "time.sleep(600)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": root})
    try:
        core_pid = int(parent.stdout.readline())
        os.kill(core_pid, 0)  # running
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert _wait_gone(core_pid, 10), "the engine core outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()


async def test_a_reader_that_falls_behind_gets_the_piled_up_tokens_as_one_delta(engine):
    params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    prompt = list(range(200, 230))
    want = [t for d in await collect(engine, "brisk", prompt, params) for t in d.token_ids]
    got = []
    async for d in engine.generate("slow", prompt, params):
        got.append(d)
        if len(got) == 1:  # the engine finishes meanwhile
            while (await asyncio.to_thread(engine.stats))["num_running"]:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.1)  # the last step's message on its way
    assert [t for d in got for t in d.token_ids] == want
    assert len(got) == 2 and got[-1].finished and got[-1].num_output_tokens == 24
    assert got[-1].metrics["first_token"] is not None and got[-1].metrics["finished"] is not None


async def test_two_frontends_share_one_core_each_getting_its_own_streams(tmp_path, tiny_llama_path):
    """The server's web processes share one engine core: the second connects to the first's socket."""
    config = EngineConfig(model=str(tiny_llama_path), device="cpu", num_kv_blocks=64)
    path = str(tmp_path / "core.sock")
    first = AsyncLLM(config, listen_path=path)
    second = AsyncLLM(config, connect=path)
    try:
        params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
        prompts = [list(range(300 + 7 * i, 320 + 7 * i)) for i in range(4)]
        want = [[t for d in await collect(first, f"solo{i}", p, params) for t in d.token_ids]
                for i, p in enumerate(prompts)]
        got = await asyncio.gather(*(collect(fe, f"r{i}", p, params)
                                     for i, (fe, p) in enumerate(zip([first, second] * 2, prompts))))
        assert [[t for d in ds for t in d.token_ids] for ds in got] == want
        # A pin made through one frontend serves the other's requests.
        assert first.pin_prefix("tenant:acme", list(range(3000, 3032)), tenant="acme").num_tokens == 32
        hit = await collect(second, "hit", list(range(3000, 3032)) + [5], SamplingParams(max_tokens=1), "acme")
        assert hit[-1].num_cached_tokens == 32 and "tenant:acme" in second.pins()
        # The second frontend leaving mid-stream aborts its request; the core goes on serving the first.
        started = asyncio.Event()

        async def long_stream():
            async for _ in second.generate("left", [9, 8, 7], SamplingParams(max_tokens=5000, ignore_eos=True)):
                started.set()

        task = asyncio.create_task(long_stream())
        await asyncio.wait_for(started.wait(), 30)
        second.shutdown()
        with pytest.raises(EngineDeadError):
            await asyncio.wait_for(task, 10)
        for _ in range(100):
            if first.stats()["num_running"] == 0:
                break
            await asyncio.sleep(0.05)
        assert first.stats()["num_blocks_used"] == first.stats()["num_blocks_pinned"]
        assert first.is_alive()
    finally:
        second.shutdown()
        first.shutdown()
    with pytest.raises(EngineDeadError, match="no engine core answers"):
        AsyncLLM(config, connect=path)


def test_a_chat_with_a_known_system_prompt_tokenizes_as_the_whole_text_does(engine):
    """encode_chat reuses the system turn's tokens; the result must equal tokenizing the whole text."""
    tok = engine.tokenizer
    system = "You are Acme's assistant. 사내 규정을 따르세요.\n" * 20
    chats = [
        [{"role": "system", "content": system}, {"role": "user", "content": "안녕? What's up?"}],
        [{"role": "system", "content": system}, {"role": "user", "content": "a"},
         {"role": "assistant", "content": "b"}, {"role": "user", "content": " leading space\n"}],
        [{"role": "system", "content": system + " "}, {"role": "user", "content": "trailing-space system"}],
        [{"role": "user", "content": "no system turn"}],
    ]
    for messages in chats * 2:  # the second time from the kept prefix
        whole = tok.encode(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
                           add_special_tokens=False)
        assert engine.encode_chat(messages) == whole
    assert engine.encode_system_prefix(system) == tok.encode(
        tok.apply_chat_template([{"role": "system", "content": system}], tokenize=False), add_special_tokens=False)
    assert engine._system_prefix.cache_info().hits >= 3
