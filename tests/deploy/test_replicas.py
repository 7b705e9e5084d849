"""Two real replicas behind a real nginx on this machine (replica_cluster.py): routing by tenant, the
REST API and the chat socket through nginx, a conversation moving between replicas, stop on either
replica, a prompt change re-pinned on both through Redis, and a replica killed mid-load.

Each replica is daphne with its own engine on a tiny random model (CPU, one thread each), on one
scratch PostgreSQL database and the run's Redis. The periodic pin watcher is off, so a re-pin on the
other replica can only have come through the channel layer. Skipped where nginx, PostgreSQL or Redis
is missing (bash deploy/install_system_packages.sh installs nginx). About a minute and a half.
"""
from __future__ import annotations

import os
import subprocess
import threading
import time

import httpx
import pytest

from replica_cluster import PYTHON, ROOT, Cluster, chat_turn, missing_services, stream_completion, wait_until
from replica_ws import WsClosed

MISSING = missing_services()
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)}")

LONG_TOKENS = 300  # the "long" profile (ignore_eos): about 1.5 s of streaming on one tiny engine
CHAT = [{"role": "user", "content": "Hello!"}]


@pytest.fixture(scope="module")
def cluster(tiny_llama_path):
    cluster = Cluster(model=str(tiny_llama_path), long_tokens=LONG_TOKENS)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()
        if not os.environ.get("PAGODA_KEEP_REPLICA_LOGS"):
            cluster.cleanup_files()


def _replica_of(cluster: Cluster, slug: str):
    """The replica nginx routes `slug` to (asked with the tenant's own API key)."""
    response = httpx.get(f"{cluster.url}/v1/models", headers=cluster.api_headers(slug), timeout=30)
    assert response.status_code == 200
    return cluster.replica_named(response.headers["x-pagoda-replica"])


def _other(cluster: Cluster, replica):
    return next(r for r in cluster.replicas if r is not replica)


def test_api_through_nginx_keeps_each_tenant_on_one_replica(cluster):
    for slug in ("acme", "globex"):
        served_by, cached = set(), []
        for _ in range(3):
            response = httpx.post(f"{cluster.url}/v1/chat/completions", headers=cluster.api_headers(slug),
                                  json={"model": "terse", "messages": CHAT}, timeout=60)
            assert response.status_code == 200, response.text
            served_by.add(response.headers["x-pagoda-replica"])
            cached.append(response.json()["usage"]["prompt_tokens_details"]["cached_tokens"])
        assert len(served_by) == 1  # the key's tenant suffix is the hash key
        assert min(cached) >= cluster.pin_blocks(0, slug) * 16  # the pinned prompt was hit
    routed = [line for line in cluster.nginx.access_log() if "POST /v1/chat/completions" in line]
    assert {line.split("tenant=")[1].split()[0] for line in routed} == {"acme", "globex"}
    # The X-Pagoda-Tenant header routes too; sixteen tenants do not all land on one of two replicas.
    names = {httpx.get(f"{cluster.url}/health", headers={"X-Pagoda-Tenant": f"t{n}"}).headers["x-pagoda-replica"]
             for n in range(16)}
    assert names == {r.name for r in cluster.replicas}
    assert httpx.get(f"{cluster.url}/metrics").status_code == 403  # scraped per replica, not through nginx


def test_sse_streams_through_nginx(cluster):
    started = time.monotonic()
    arrivals = []
    with httpx.stream("POST", f"{cluster.url}/v1/chat/completions", headers=cluster.api_headers("acme"),
                      json={"model": "long", "messages": CHAT, "stream": True}, timeout=60) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                arrivals.append(time.monotonic() - started)
    # One event per token while the reader keeps up; tokens that piled up while it was busy come as one.
    assert len(arrivals) >= LONG_TOKENS // 2
    assert arrivals[0] < 0.5 * arrivals[-1]  # the first token left long before the last was made


def test_chat_socket_through_nginx_continues_on_the_other_replica_and_stops_on_both(cluster):
    erin = cluster.login("erin")
    assert erin.cookies["pagoda_tenant"] == "acme"  # set by the platform at login: what nginx hashes
    home = _replica_of(cluster, "acme")
    other = _other(cluster, home)
    conversation_id = cluster.new_conversation(erin, "acme")

    with cluster.socket(erin, conversation_id) as ws:  # through nginx: the tenant's replica
        first = chat_turn(ws, {"type": "user_message", "content": "Hi there", "profile": "terse"})
    assert first[0]["type"] == "start" and first[-1]["type"] == "done" and first[-1]["status"] == "complete"
    with cluster.socket(erin, conversation_id, base_url=other.url) as ws:  # the same session, the other replica
        second = chat_turn(ws, {"type": "user_message", "content": "And again", "profile": "terse"})
        assert second[-1]["status"] == "complete"
        # The second prompt holds the first turn, read from PostgreSQL by the other replica.
        assert second[-1]["usage"]["prompt_tokens"] > first[-1]["usage"]["prompt_tokens"]
        stopped = _stop_mid_reply(ws)
    assert stopped["status"] == "stopped" and stopped["finish_reason"] == "abort"
    with cluster.socket(erin, conversation_id) as ws:
        assert _stop_mid_reply(ws)["status"] == "stopped"

    rows = cluster.db.rows("SELECT role, status FROM tenants_message WHERE conversation_id = %s ORDER BY id",
                           (conversation_id,))
    assert [(r["role"], r["status"]) for r in rows] == [
        ("user", "complete"), ("assistant", "complete"), ("user", "complete"), ("assistant", "complete"),
        ("user", "complete"), ("assistant", "stopped"), ("user", "complete"), ("assistant", "stopped")]
    sockets = [line for line in cluster.nginx.access_log() if f"/ws/chat/{conversation_id}/" in line]
    assert sockets and all(" 101 " in line and f"upstream=127.0.0.1:{home.port}" in line for line in sockets)


def _stop_mid_reply(ws) -> dict:
    ws.send_json({"type": "user_message", "content": "Tell me a long story", "profile": "long"})
    while ws.recv_json(60)["type"] != "delta":
        pass
    ws.send_json({"type": "stop"})
    while (frame := ws.recv_json(60))["type"] != "done":
        assert frame["type"] == "delta", frame
    return frame


def test_prompt_change_is_repinned_on_every_replica(cluster):
    home = _replica_of(cluster, "acme")
    other = _other(cluster, home)
    applied_before = cluster.stats(other.index)["pin_listener"]["num_applied"]
    assert cluster.pin_blocks(home.index, "acme") == cluster.pin_blocks(other.index, "acme") == 3

    # A tenant admin saves a longer prompt in the console, through nginx (root's cookie names acme).
    response = cluster.post_form(cluster.root, "/console/acme/prompt/",
                                 {"text": cluster.seed["prompts"]["acme"] * 2, "note": "twice as long"})
    assert response.status_code == 302 and response.headers["x-pagoda-replica"] == home.name
    wait_until(lambda: _repinned(cluster, "acme", longer_than=3), 20, what="the new acme prompt pinned on both")
    assert cluster.stats(other.index)["pin_listener"]["num_applied"] == applied_before + 1

    # A management command is a third process, without an engine or a listener: it only announces.
    env = cluster.env()
    done = subprocess.run([PYTHON, "manage.py", "set_system_prompt", "globex", "--no-engine",
                           "--text", cluster.seed["prompts"]["globex"] * 2], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    wait_until(lambda: _repinned(cluster, "globex", longer_than=3), 20, what="the new globex prompt pinned on both")


def _repinned(cluster: Cluster, slug: str, longer_than: int) -> bool:
    """Every replica pins `slug`'s prompt in the same number of blocks, more than before."""
    blocks = {cluster.pin_blocks(r.index, slug) for r in cluster.replicas}
    return len(blocks) == 1 and (blocks.pop() or 0) > longer_than


def test_killed_replica_its_clients_retry_on_the_other_and_nothing_saved_is_lost(cluster):
    home = _replica_of(cluster, "acme")
    survivor = _other(cluster, home)
    erin = cluster.login("erin")
    conversation_id = cluster.new_conversation(erin, "acme")
    with cluster.socket(erin, conversation_id) as ws:
        chat_turn(ws, {"type": "user_message", "content": "Remember: the code word is pagoda.", "profile": "terse"})
    saved = cluster.db.rows("SELECT id, role, status, content FROM tenants_message ORDER BY id")
    num_usage_rows = cluster.db.rows("SELECT count(*) AS n FROM tenants_apiusage")[0]["n"]

    # Mid-load: three streamed API answers and one chat reply in flight on the tenant's replica.
    started = [threading.Event() for _ in range(3)]
    results: list[dict] = [{} for _ in started]
    body = {"model": "long", "messages": [{"role": "user", "content": "Count to a thousand."}]}
    threads = [threading.Thread(target=lambda i=i: results[i].update(stream_completion(
        cluster.url, cluster.api_headers("acme"), body, on_first_chunk=started[i].set))) for i in range(3)]
    for thread in threads:
        thread.start()
    ws = cluster.socket(erin, conversation_id)
    ws.send_json({"type": "user_message", "content": "Now tell me a long story.", "profile": "long"})
    assert ws.recv_json(60)["type"] == "start"
    assert all(event.wait(60) for event in started)
    home.kill()

    with pytest.raises(WsClosed):  # the socket dies with its replica
        while True:
            ws.recv_json(30)
    ws.close()
    for thread in threads:
        thread.join(120)
    for result in results:
        assert result["done"] and result["attempts"] >= 2, result
        assert result["replicas"][0] == home.name and result["replicas"][-1] == survivor.name

    # The page reconnects (through nginx: now the survivor) and asks again for the interrupted reply.
    def reconnect():
        return cluster.socket(erin, conversation_id)

    # The dead replica's turn held the conversation's reply lease: a new turn is refused as
    # reply_in_progress until that lease expires (PAGODA_CHAT_REPLY_LOCK_SECONDS after its last renewal).
    deadline = time.monotonic() + 45
    with wait_until(reconnect, 10, 1.0, what="the chat socket reconnected") as ws:
        while True:
            again = chat_turn(ws, {"type": "regenerate", "profile": "terse"})
            if again[-1].get("code") != "reply_in_progress" or time.monotonic() > deadline:
                break
            time.sleep(1)
    assert again[-1]["type"] == "done" and again[-1]["status"] == "complete", again[-1]

    after = {row["id"]: row for row in cluster.db.rows("SELECT id, role, status, content FROM tenants_message")}
    assert all(after[row["id"]] == row for row in saved)  # every row saved before the kill, unchanged
    thread_rows = cluster.db.rows("SELECT role, status FROM tenants_message WHERE conversation_id = %s ORDER BY id",
                                  (conversation_id,))
    assert [(r["role"], r["status"]) for r in thread_rows] == [
        ("user", "complete"), ("assistant", "complete"),
        ("user", "complete"),  # saved before the reply began: survives the kill
        ("assistant", "pending"),  # the reply that died with its replica (see docs/REPLICAS.md)
        ("assistant", "complete")]  # regenerated on the survivor
    assert cluster.db.rows("SELECT count(*) AS n FROM tenants_apiusage")[0]["n"] >= num_usage_rows + 3
    assert _replica_of(cluster, "acme") is survivor
