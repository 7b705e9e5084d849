"""Two replicas behind nginx on this machine, exercised end to end, printing what happened and how long
it took (deploy/replicas_demo.sh runs it; docs/REPLICAS.md records a run).

    python tests/deploy/replicas_demo.py [--model NAME_OR_FOLDER] [--long-tokens N] [--clients N]

The same harness as tests/deploy/test_replicas.py (replica_cluster.py), with the embedded default
model unless --model says otherwise. Every step is bounded; the whole run stops itself.
"""
from __future__ import annotations

import argparse
import threading
import time

import httpx

from replica_cluster import Cluster, chat_turn, missing_services, stream_completion, wait_until
from replica_ws import WsClosed

CHAT = [{"role": "user", "content": "Hello! Who are you?"}]


def step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def replica_of(cluster: Cluster, slug: str):
    response = httpx.get(f"{cluster.url}/v1/models", headers=cluster.api_headers(slug), timeout=30)
    return cluster.replica_named(response.headers["x-pagoda-replica"])


def timed_stream(url: str, headers: dict, body: dict) -> tuple[float, float, int]:
    """(seconds to the first content event, seconds to [DONE], number of events)."""
    started = time.monotonic()
    first = None
    num_events = 0
    with httpx.stream("POST", f"{url}/v1/chat/completions", headers=headers, json={**body, "stream": True},
                      timeout=120) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                num_events += 1
                if first is None and '"content"' in line:
                    first = time.monotonic() - started
    return first or 0.0, time.monotonic() - started, num_events


def routing(cluster: Cluster) -> None:
    step("routing through nginx (hash $pagoda_route_key consistent)")
    for slug in ("acme", "globex"):
        print(f"  API key of {slug:<7} (…{cluster.seed['keys'][slug][-8:]}) -> {replica_of(cluster, slug).name}")
    by_header = {}
    for n in range(8):
        response = httpx.get(f"{cluster.url}/health", headers={"X-Pagoda-Tenant": f"t{n}"}, timeout=10)
        by_header[f"t{n}"] = response.headers["x-pagoda-replica"]
    print("  X-Pagoda-Tenant t0..t7 ->", ", ".join(f"{k}:{v[-1]}" for k, v in by_header.items()))


def api(cluster: Cluster) -> None:
    step("REST API through nginx")
    for slug in ("acme", "globex"):
        latencies, cached = [], []
        for _ in range(3):
            started = time.monotonic()
            response = httpx.post(f"{cluster.url}/v1/chat/completions", headers=cluster.api_headers(slug),
                                  json={"model": "terse", "messages": CHAT}, timeout=120)
            latencies.append(time.monotonic() - started)
            usage = response.json()["usage"]
            cached.append(f"{usage['prompt_tokens_details']['cached_tokens']}/{usage['prompt_tokens']}")
            served = response.headers["x-pagoda-replica"]
        print(f"  {slug:<7} 3 x {response.status_code} on {served}: latency "
              f"{', '.join(f'{s:.2f}' for s in latencies)} s, cached/prompt tokens {', '.join(cached)}")
    home = replica_of(cluster, "acme")
    body = {"model": "long", "messages": CHAT}
    for label, url in (("nginx", cluster.url), (f"{home.name} direct", home.url)):
        first, total, num_events = timed_stream(url, cluster.api_headers("acme"), body)
        print(f"  SSE via {label:<18} first token {first:.2f} s, [DONE] {total:.2f} s, {num_events} events")


def chat(cluster: Cluster) -> None:
    step("chat WebSocket through nginx, continued on the other replica, stopped on both")
    erin = cluster.login("erin")
    home = replica_of(cluster, "acme")
    other = next(r for r in cluster.replicas if r is not home)
    print(f"  erin logged in through nginx: cookie pagoda_tenant={erin.cookies['pagoda_tenant']} -> {home.name}")
    conversation_id = cluster.new_conversation(erin, "acme")
    for label, base in ((f"nginx -> {home.name}", None), (f"{other.name} direct", other.url)):
        started = time.monotonic()
        with cluster.socket(erin, conversation_id, base_url=base) as ws:
            frames = chat_turn(ws, {"type": "user_message", "content": "Say hello.", "profile": "terse"})
        done = frames[-1]
        print(f"  turn via {label:<18} {done['status']}, prompt {done['usage']['prompt_tokens']} tokens "
              f"({done['usage']['cached_tokens']} cached), {time.monotonic() - started:.2f} s")
    for label, base in ((f"nginx -> {home.name}", None), (f"{other.name} direct", other.url)):
        with cluster.socket(erin, conversation_id, base_url=base) as ws:
            ws.send_json({"type": "user_message", "content": "Tell me a long story.", "profile": "long"})
            while ws.recv_json(120)["type"] != "delta":
                pass
            started = time.monotonic()
            ws.send_json({"type": "stop"})
            while (frame := ws.recv_json(120))["type"] != "done":
                pass
        print(f"  stop via {label:<18} {frame['status']} ({frame['finish_reason']}) "
              f"{(time.monotonic() - started) * 1000:.0f} ms after the stop frame")
    rows = cluster.db.rows("SELECT role, status FROM tenants_message WHERE conversation_id = %s ORDER BY id",
                           (conversation_id,))
    print("  PostgreSQL:", ", ".join(f"{r['role']}/{r['status']}" for r in rows))


def prompt_change(cluster: Cluster) -> None:
    step("prompt change in the console, re-pinned on every replica through Redis (periodic sync off)")
    before = {r.name: cluster.pin_blocks(r.index, "acme") for r in cluster.replicas}
    started = time.monotonic()
    response = cluster.post_form(cluster.root, "/console/acme/prompt/",
                                 {"text": cluster.seed["prompts"]["acme"] * 2, "note": "demo"})
    saved_at = time.monotonic()
    saved_by = response.headers.get("x-pagoda-replica")
    print(f"  saved by {saved_by} (HTTP {response.status_code}) in {saved_at - started:.2f} s, its own re-pin "
          f"included; pinned blocks before: {before}")
    repinned_at: dict[str, float] = {}

    def all_repinned() -> bool:
        for replica in cluster.replicas:
            if replica.name not in repinned_at and cluster.pin_blocks(replica.index, "acme") != before[replica.name]:
                repinned_at[replica.name] = time.monotonic() - saved_at
        return len(repinned_at) == len(cluster.replicas)

    wait_until(all_repinned, 30, 0.05, what="re-pinned everywhere")
    for replica in cluster.replicas:
        listener = cluster.stats(replica.index)["pin_listener"]
        print(f"  {replica.name}: {cluster.pin_blocks(replica.index, 'acme')} blocks pinned, seen "
              f"{repinned_at[replica.name]:.2f} s after the save returned; listener received "
              f"{listener['num_received']}, applied {listener['num_applied']}")


def kill(cluster: Cluster, num_clients: int) -> None:
    home = replica_of(cluster, "acme")
    survivor = next(r for r in cluster.replicas if r is not home)
    step(f"{home.name} killed (SIGKILL) with {num_clients} API streams and a chat reply in flight")
    erin = cluster.login("erin")
    conversation_id = cluster.new_conversation(erin, "acme")
    with cluster.socket(erin, conversation_id) as ws:
        chat_turn(ws, {"type": "user_message", "content": "The code word is pagoda.", "profile": "terse"})
    saved = cluster.db.rows("SELECT id, role, status, content FROM tenants_message ORDER BY id")
    num_usage = cluster.db.rows("SELECT count(*) AS n FROM tenants_apiusage")[0]["n"]

    started = [threading.Event() for _ in range(num_clients)]
    results: list[dict] = [{} for _ in started]
    body = {"model": "long", "messages": [{"role": "user", "content": "Count slowly to one hundred."}]}

    def client(i: int) -> None:
        t0 = time.monotonic()
        results[i].update(stream_completion(cluster.url, cluster.api_headers("acme"), body,
                                            on_first_chunk=started[i].set))
        results[i]["seconds"] = time.monotonic() - t0

    threads = [threading.Thread(target=client, args=(i,)) for i in range(num_clients)]
    for thread in threads:
        thread.start()
    ws = cluster.socket(erin, conversation_id)
    ws.send_json({"type": "user_message", "content": "Now a long story, please.", "profile": "long"})
    if not all(event.wait(120) for event in started):
        raise RuntimeError("the streams did not start")
    killed_at = time.monotonic()
    home.kill()
    try:
        while True:
            ws.recv_json(30)
    except WsClosed as exc:
        print(f"  chat socket closed {time.monotonic() - killed_at:.2f} s after the kill (code {exc.code})")
    ws.close()
    for thread in threads:
        thread.join(180)
    for i, result in enumerate(results):
        print(f"  API client {i}: done={result['done']} after {result['attempts']} attempts "
              f"({' -> '.join(str(r) for r in result['replicas'])}; errors {result['errors']}), "
              f"{result['seconds']:.2f} s in all")
    reconnect_started = time.monotonic()
    with wait_until(lambda: cluster.socket(erin, conversation_id), 15, 1.0, what="reconnect") as ws:
        frames = chat_turn(ws, {"type": "regenerate", "profile": "terse"})
    print(f"  chat reconnected through nginx and regenerated: {frames[-1]['status']} in "
          f"{time.monotonic() - reconnect_started:.2f} s")
    after = {row["id"]: row for row in cluster.db.rows("SELECT id, role, status, content FROM tenants_message")}
    unchanged = sum(after.get(row["id"]) == row for row in saved)
    rows = cluster.db.rows("SELECT role, status FROM tenants_message WHERE conversation_id = %s ORDER BY id",
                           (conversation_id,))
    num_usage_after = cluster.db.rows("SELECT count(*) AS n FROM tenants_apiusage")[0]["n"]
    print(f"  PostgreSQL: {unchanged}/{len(saved)} messages saved before the kill unchanged; this conversation: "
          + ", ".join(f"{r['role']}/{r['status']}" for r in rows))
    print(f"  API usage rows: {num_usage} before, {num_usage_after} after (the cut streams wrote none)")
    print(f"  acme's next request -> {replica_of(cluster, 'acme').name} (survivor: {survivor.name})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--long-tokens", type=int, default=24, help="length of the 'long' replies")
    parser.add_argument("--clients", type=int, default=3, help="API streams in flight at the kill")
    args = parser.parse_args()
    missing = missing_services()
    if missing:
        raise SystemExit(f"missing: {', '.join(missing)}")
    t0 = time.monotonic()
    cluster = Cluster(model=args.model, long_tokens=args.long_tokens)
    try:
        step(f"start: 2 replicas of {args.model} (CPU, 1 thread each), PostgreSQL {cluster.db.name}, Redis, nginx")
        cluster.start()
        print(f"  seeded, both engines loaded and pinned, nginx on {cluster.url}: {time.monotonic() - t0:.1f} s")
        for replica in cluster.replicas:
            stats = cluster.stats(replica.index)
            pins = {k: v["num_blocks"] for k, v in stats["pins"].items()}
            print(f"  {replica.name} on 127.0.0.1:{replica.port}: engine {stats['engine']['state']}, "
                  f"pinned blocks {pins}, listener joined {stats['pin_listener']['joined']}")
        routing(cluster)
        api(cluster)
        chat(cluster)
        prompt_change(cluster)
        kill(cluster, args.clients)
    finally:
        cluster.close()
        cluster.cleanup_files()
    print(f"\nall done in {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    main()
