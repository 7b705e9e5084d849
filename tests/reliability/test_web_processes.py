"""Several web processes sharing one engine core (python -m pagoda.serve, PAGODA_WEB_PROCESSES): both
serve API streams and chat turns from the one core and its pins; a killed core comes back for both;
stopping the launcher leaves no process behind."""
import asyncio
import signal
import time

import psutil
import pytest

import api_client
import reliability_server as rs
from ws_client import open_chat, run_turn

SEED = {"num_users": 2, "num_conversations": 8, "max_tokens": 6, "long_tokens": 60}


@pytest.fixture(scope="module")
def two_process_server(tmp_path_factory, tiny_llama_path):
    server = rs.launch(tmp_path_factory.mktemp("two-web"), str(tiny_llama_path),
                       engine_config={"num_kv_blocks": 256, "max_num_seqs": 32}, seed=SEED, web_processes=2)
    try:
        yield server
    finally:
        rs.live.stop(server.process)


def _web_processes(server) -> list[psutil.Process]:
    return [p for p in psutil.Process(server.process.pid).children() if "daphne" in " ".join(p.cmdline())]


def _cores(web: psutil.Process) -> list[psutil.Process]:
    return [p for p in web.children() if "inference.engine_core" in " ".join(p.cmdline())]


def _all_ready(server, timeout: float = 120) -> None:
    """/health answers 200 twenty times in a row (the kernel deals connections to both processes)."""
    deadline, streak = time.monotonic() + timeout, 0
    while streak < 20:
        assert time.monotonic() < deadline, server.health()
        streak = streak + 1 if server.health()[0] == 200 else 0
        time.sleep(0.05 if streak else 0.3)


async def _burst(server):
    async with api_client.client(16) as http:
        calls = [api_client.post(http, server, "completions",
                                 {"model": "quick", "prompt": f"burst {i}", "max_tokens": 5}, "acme")
                 for i in range(24)]
        chats = []
        for user in server.users:
            for conversation in user["conversations"][:2]:
                chats.append(_chat(server, user, conversation))
        return await asyncio.gather(*calls), await asyncio.gather(*chats)


async def _chat(server, user, conversation_id):
    async with open_chat(server, conversation_id, user["session"]) as ws:
        return await run_turn(ws, "Hello there", profile="quick", timeout=120)


def _served_by(server, webs: list[psutil.Process]) -> set[int]:
    """Which web processes hold an established connection on the server's port right now."""
    port = int(server.url.rsplit(":", 1)[1])
    return {w.pid for w in webs for c in w.net_connections(kind="tcp")
            if c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == port}


def test_two_web_processes_share_one_core(two_process_server):
    server = two_process_server
    webs = _web_processes(server)
    assert len(webs) == 2
    assert [len(_cores(w)) for w in webs] == [1, 0]  # the first started the core; the second uses it
    _all_ready(server)
    seen: set[int] = set()

    async def burst_and_watch():
        task = asyncio.ensure_future(_burst(server))
        while not task.done():
            seen.update(_served_by(server, webs))
            await asyncio.sleep(0.01)
        return await task

    for _ in range(3):
        calls, chats = asyncio.run(burst_and_watch())
        assert all(c[0] == 200 and c[1]["choices"][0]["finish_reason"] for c in calls), calls[:2]
        assert all(t.end["type"] == "done" and t.end["status"] == "complete" for t in chats)
        if seen == {w.pid for w in webs}:
            break
    assert seen == {w.pid for w in webs}, "the kernel should deal connections to both processes"
    stats = server.engine_stats()
    assert {f"tenant:{slug}" for slug in server.prompts} <= set(stats["pins"])
    assert rs.leaked_blocks(server.wait_idle()) == 0


def test_a_killed_core_comes_back_for_both_processes(two_process_server):
    server = two_process_server
    webs = _web_processes(server)
    core = _cores(webs[0])[0]
    core.kill()
    time.sleep(1.5)
    _all_ready(server, timeout=180)
    assert _cores(webs[0])[0].pid != core.pid
    calls, chats = asyncio.run(_burst(server))
    assert all(c[0] == 200 for c in calls) and all(t.end["type"] == "done" for t in chats)
    assert _web_processes(server) == webs  # the web processes themselves were never restarted


def test_stopping_the_launcher_leaves_no_process(tmp_path, tiny_llama_path):
    server = rs.launch(tmp_path, str(tiny_llama_path), engine_config={"num_kv_blocks": 64, "max_num_seqs": 4},
                       seed={"num_users": 1, "num_conversations": 1, "max_tokens": 2}, web_processes=2)
    family = [psutil.Process(server.process.pid), *psutil.Process(server.process.pid).children(recursive=True)]
    assert len(family) == 4  # the launcher, two daphne processes, the engine core
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(60) == 0
    gone, alive = psutil.wait_procs(family, timeout=30)
    assert not alive, alive
