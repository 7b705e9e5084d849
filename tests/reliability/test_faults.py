"""Faults on live servers: clients that vanish mid-answer, a request that fails inside the engine, a
crashed engine loop (restarted by engine_runtime's watchdog, then, past its budget, left to the
supervisor). The database going away is test_faults_database.py.

Disconnects: 100 here, 1,000 with PAGODA_LOAD_TESTS=1 (half API streams, half chat sockets, in waves
of 25; half the sockets close cleanly, half drop the TCP connection)."""
import asyncio
import subprocess
import threading
import time

import api_client
import reliability_server as rs
from faulty_daphne import CRASH, POISON
from ws_client import next_frame, open_chat, run_turn

NUM_DISCONNECTS = 1000 if rs.LOAD_TESTS else 100
WAVE = 25
STORY = [{"role": "user", "content": "Tell me a very long story about a lighthouse."}]


# --- disconnects ---
async def _api_leave(http, server, key: str) -> str:
    s = await api_client.stream(http, server, "chat/completions", {"model": "long", "messages": STORY}, key,
                                leave_after_first_content=True)
    assert s.status == 200 and s.first_content_at is not None, s.error
    return s.id


async def _ws_leave(server, user: dict, conversation_id: int, abrupt: bool) -> int:
    async with open_chat(server, conversation_id, user["session"]) as ws:
        turn = await run_turn(ws, "Tell me a very long story.", profile="long", stop_after_first_delta=True)
        assert turn.frames[0]["type"] == "start" and turn.first_delta_at is not None, turn.frames
        if abrupt:
            ws.transport.abort()  # no close frame: the TCP connection just ends
    return turn.frames[0]["message_id"]


async def _disconnect_waves(server, num: int) -> tuple[list[str], list[int]]:
    slots = [(u, c) for u in server.users for c in u["conversations"]]
    request_ids, reply_ids = [], []
    async with api_client.client(WAVE) as http:
        for start in range(0, num, WAVE):
            jobs = []
            for i in range(start, min(num, start + WAVE)):
                if i % 2 == 0:
                    jobs.append(_api_leave(http, server, ("acme", "globex", "north")[i % 3]))
                else:
                    user, conversation = slots[(i // 2) % len(slots)]
                    jobs.append(_ws_leave(server, user, conversation, abrupt=i % 4 == 1))
            for result in await asyncio.gather(*jobs):
                (request_ids if isinstance(result, str) else reply_ids).append(result)
    return request_ids, reply_ids


def _wait_rows(server, sql: str, expected: int, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while True:
        count = server.db.row(sql)["n"]
        if count == expected or time.monotonic() > deadline:
            return count
        time.sleep(0.2)


def test_clients_leaving_mid_answer_leak_nothing(rel_server):
    rss_before = rel_server.rss_mb()
    started = time.monotonic()
    request_ids, reply_ids = asyncio.run(_disconnect_waves(rel_server, NUM_DISCONNECTS))
    elapsed = time.monotonic() - started
    stats = rel_server.wait_idle(timeout=60)
    assert stats["num_running"] == stats["num_waiting"] == 0
    assert rs.leaked_blocks(stats) == 0, stats
    # Every API call is recorded as the client closing (499); every chat reply is saved as stopped.
    ids = "','".join(request_ids)
    n_499 = _wait_rows(rel_server, f"SELECT COUNT(*) AS n FROM tenants_apiusage WHERE request_id IN ('{ids}') "
                                   "AND status_code = 499", len(request_ids))
    replies = ",".join(map(str, reply_ids))
    n_stopped = _wait_rows(rel_server, f"SELECT COUNT(*) AS n FROM tenants_message WHERE id IN ({replies}) "
                                       "AND status = 'stopped'", len(reply_ids))
    assert (n_499, n_stopped) == (len(request_ids), len(reply_ids))
    assert rel_server.db.row("SELECT COUNT(*) AS n FROM tenants_message WHERE status = 'pending'")["n"] == 0
    rss_after = rel_server.rss_mb()
    assert rel_server.health()[0] == 200
    print(f"\ndisconnects: {len(request_ids)} API streams + {len(reply_ids)} sockets left mid-answer in "
          f"{elapsed:.0f} s; after: running {stats['num_running']}, waiting {stats['num_waiting']}, "
          f"leaked blocks {rs.leaked_blocks(stats)}; RSS {rss_before:.0f} -> {rss_after:.0f} MiB")


# --- one request failing inside the engine ---
def test_a_request_that_fails_inside_the_engine_fails_alone(fault_server):
    async def scenario():
        async with api_client.client(8) as http:
            normal = [api_client.post(http, fault_server, "completions",
                                      {"model": "long", "prompt": f"Count to {i}", "max_tokens": 40}, "north")
                      for i in range(6)]
            await asyncio.sleep(0)
            poisoned = api_client.post(http, fault_server, "completions",
                                       {"model": "long", "prompt": [1, 2, *POISON, 3], "max_tokens": 40}, "north")
            return await asyncio.gather(poisoned, *normal)

    (code, body, _, _), *normal = asyncio.run(scenario())
    assert code == 500 and body["error"]["code"] == "engine_error" and "injected" in body["error"]["message"]
    assert [(c, b["usage"]["completion_tokens"]) for c, b, _, _ in normal] == [(200, 40)] * 6
    health = fault_server.health()
    assert health[0] == 200 and health[1]["num_restarts"] == 0  # the loop never stopped
    assert rs.leaked_blocks(fault_server.wait_idle()) == 0


# --- a crashed engine loop ---
class HealthWatch:
    """Polls /health every 20 ms in a thread; keeps the (status, engine state) pairs it saw."""

    def __init__(self, server):
        self.server, self.seen, self._stop = server, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            code, body = self.server.health()
            self.seen.append((code, body["engine"]))
            time.sleep(0.02)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)


def _thread_rows(server, conversation_id: int) -> list[dict]:
    return server.db.rows("SELECT id, role, content, status FROM tenants_message WHERE conversation_id = %s "
                          "ORDER BY id", (conversation_id,))


async def _chat_once(server, user, conversation_id: int, profile: str = "quick"):
    async with open_chat(server, conversation_id, user["session"]) as ws:
        return await run_turn(ws, "Hello there", profile=profile, timeout=120)


async def _crash_during_a_reply(server, user, conversation_id: int):
    """A long chat reply streams; a poisoned-for-crash API request kills the loop under it."""
    async with open_chat(server, conversation_id, user["session"]) as ws:
        turn = await run_turn(ws, "Tell me a long story", profile="long", stop_after_first_delta=True)
        async with api_client.client(2) as http:
            crash = await api_client.post(http, server, "completions",
                                          {"model": "long", "prompt": [*CRASH, 5], "max_tokens": 4}, "north")
        frames = [await next_frame(ws, 60)]
        while frames[-1]["type"] not in ("done", "error"):
            frames.append(await next_frame(ws, 60))
        return turn, frames, crash


def _wait_health(server, code: int, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        got, body = server.health()
        if got == code:
            return body
        assert time.monotonic() < deadline, f"/health stayed {got}: {body}"
        time.sleep(0.1)


def test_a_crashed_loop_is_reported_restarted_once_then_left_to_the_supervisor(fault_server):
    user = fault_server.users[0]
    saved_id, streaming_id, later_id = user["conversations"][:3]
    done = asyncio.run(_chat_once(fault_server, user, saved_id))
    assert done.end["type"] == "done" and done.end["status"] == "complete"
    saved = _thread_rows(fault_server, saved_id)

    with HealthWatch(fault_server) as watch:
        turn, frames, crash = asyncio.run(_crash_during_a_reply(fault_server, user, streaming_id))
        body = _wait_health(fault_server, 200)
    assert crash[0] == 503 and crash[1]["error"]["code"] == "engine_unavailable"
    assert frames[-1]["type"] == "error" and frames[-1]["code"] == "engine_unavailable", frames
    assert frames[-1]["message_id"] == turn.frames[0]["message_id"]
    assert any(code == 503 for code, _ in watch.seen), watch.seen[-5:]  # /health reported it
    assert body["num_restarts"] == 1
    pins = fault_server.engine_stats()["pins"]
    assert {"tenant:acme", "tenant:globex"} <= set(pins)  # the start-up hook pinned the prompts again
    # What was saved before the crash is untouched; the interrupted reply is saved as an error.
    assert _thread_rows(fault_server, saved_id) == saved
    interrupted = _thread_rows(fault_server, streaming_id)[-1]
    assert interrupted["status"] == "error" and interrupted["role"] == "assistant"
    again = asyncio.run(_chat_once(fault_server, user, later_id))
    assert again.end["type"] == "done" and again.end["status"] == "complete"

    # The second crash within the hour is past PAGODA_ENGINE_MAX_RESTARTS=1: /health stays 503.
    asyncio.run(_crash_during_a_reply(fault_server, user, streaming_id))
    body = _wait_health(fault_server, 503)
    time.sleep(3)
    code, body = fault_server.health()
    assert code == 503 and body["engine"] == "dead" and "injected engine loop crash" in body["reason"]
    assert body["num_restarts"] == 1
    refused = asyncio.run(_chat_once(fault_server, user, later_id))
    assert refused.end["type"] == "error" and refused.end["code"] == "engine_unavailable"
    assert _thread_rows(fault_server, saved_id) == saved
    assert fault_server.alive()
    print(f"\ncrash: /health samples {len(watch.seen)}, 503 while restarting: "
          f"{sum(1 for c, _ in watch.seen if c == 503)}; restarted once, then left dead (503)")


# --- the engine core's process killed, the server stopped ---
def _engine_core(server):
    """The engine core: the one child of the server process that runs inference.engine_core."""
    import psutil

    cores = [p for p in psutil.Process(server.process.pid).children()
             if "inference.engine_core" in " ".join(p.cmdline())]
    assert len(cores) == 1, cores
    return cores[0]


async def _kill_core_during_a_reply(server, user, conversation_id: int, core):
    """A chat reply and an API stream are running when the engine core is killed with -9."""
    async with open_chat(server, conversation_id, user["session"]) as ws:
        turn = await run_turn(ws, "Tell me a long story", profile="long", stop_after_first_delta=True)
        async with api_client.client(2) as http:
            stream = asyncio.create_task(api_client.stream(
                http, server, "chat/completions", {"model": "long", "messages": STORY}, "acme"))
            await asyncio.sleep(0.3)
            core.kill()
            api = await stream
        frames = [await next_frame(ws, 60)]
        while frames[-1]["type"] not in ("done", "error"):
            frames.append(await next_frame(ws, 60))
        return turn, frames, api


def test_a_killed_engine_process_fails_its_requests_clearly_and_comes_back_with_its_pins(rel_server):
    user = rel_server.users[0]
    streaming_id, later_id = user["conversations"][-2:]
    core = _engine_core(rel_server)
    with HealthWatch(rel_server) as watch:
        turn, frames, api = asyncio.run(_kill_core_during_a_reply(rel_server, user, streaming_id, core))
        body = _wait_health(rel_server, 200)
    core.wait(10)  # not our child: psutil cannot tell its exit code, only that it is gone
    assert not core.is_running()
    # The chat gets an error frame for its reply, which is saved as failed; the API stream ends with an error.
    assert frames[-1]["type"] == "error" and frames[-1]["code"] == "engine_unavailable", frames
    assert frames[-1]["message_id"] == turn.frames[0]["message_id"]
    interrupted = _thread_rows(rel_server, streaming_id)[-1]
    assert interrupted["status"] == "error" and interrupted["role"] == "assistant"
    # The stream had begun (200): it ends with an error event, as OpenAI's streams do.
    ended_in_error = api.status == 200 and any(
        isinstance(e, dict) and e.get("error", {}).get("code") == "engine_unavailable" for e in api.events)
    assert ended_in_error or (api.status == 503 and api.error is not None), api
    assert any(code == 503 for code, _ in watch.seen), watch.seen[-5:]
    assert body["num_restarts"] >= 1 and "killed by signal 9" in (body.get("last_crash") or ""), body
    # A new core, with every tenant's prompt pinned again, serves the next turn.
    assert _engine_core(rel_server).pid != core.pid
    # /health is 200 once the engine is up; the start-up hook re-pins the tenants' prompts right after.
    wanted = {f"tenant:{slug}" for slug in rel_server.prompts}
    rs.live.wait_ready(rel_server, rel_server.process, sorted(wanted), timeout=60)
    assert wanted <= set(rel_server.engine_stats()["pins"])
    again = asyncio.run(_chat_once(rel_server, user, later_id))
    assert again.end["type"] == "done" and again.end["status"] == "complete"
    assert rs.leaked_blocks(rel_server.wait_idle()) == 0


def test_stopping_the_server_leaves_no_engine_process_behind(tmp_path, tiny_llama_path):
    import signal

    import psutil

    # The SIGINT server starts as a script's background job (`run.sh &`) does, with SIGINT ignored.
    # Twisted leaves an ignored SIGINT alone; pagoda.asgi restores it.
    for how in (signal.SIGTERM, signal.SIGINT):
        # PYTHONFAULTHANDLER: a server that outlives the signal is sent SIGABRT, and its log then ends
        # with every thread's stack (where it hangs).
        with rs.running_server(tmp_path / how.name, str(tiny_llama_path), engine_config=ROOMY_SMALL,
                               seed={"num_users": 1, "num_conversations": 1, "max_tokens": 2},
                               extra_env={"PYTHONFAULTHANDLER": "1"},
                               sigint_ignored=how == signal.SIGINT) as server:
            core = _engine_core(server)
            server.process.send_signal(how)
            try:
                server.process.wait(30)
            except subprocess.TimeoutExpired:
                server.process.send_signal(signal.SIGABRT)
                server.process.wait(10)
                raise AssertionError(f"the server was still running 30 s after {how.name}; its log ends with "
                                     f"its threads' stacks:\n{server.log_tail(20000)}") from None
            try:
                core.wait(15)
            except psutil.TimeoutExpired:
                raise AssertionError(f"{how.name} left the engine core {core.pid} running") from None


ROOMY_SMALL = {"num_kv_blocks": 64, "max_num_seqs": 8}
