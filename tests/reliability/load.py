"""The load run: N concurrent chat sockets and M concurrent streaming API calls (and, with --logins L,
L employees logging in through the login form at the same moment, burst.py) against a live server
on 127.0.0.1 with the default model (SmolLM2-135M-Instruct), checked and measured.

    .venv/bin/python tests/reliability/load.py --chats 200 --streams 100 --max-tokens 4 --rounds 4 \
        --daphne-arg=--websocket_connect_timeout=30 --json connect30.json

Each round opens every socket and every stream at once (one turn each, a distinct question each,
replies of exactly --max-tokens tokens: the profile ignores EOS). Checked per reply: one start and
one done frame (or role, finish and usage chunks, then [DONE]), the text of the delta frames equal to
the reply saved in the database, the stream's per-token logprobs adding up to its usage (so no chunk
was lost or repeated), a usage row per API call. Measured: TTFT (send -> first text) p50 / p99, wall
time, output tokens per second, the server's RSS after a warm-up and after each round, the engine's
KV blocks once idle (leaked = used - pinned). Logins are checked by burst.verify (every login and
turn done and saved, no 5xx) and timed (login POST -> redirect, form -> done frame). Exit status 1 if
any check failed.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import burst  # noqa: E402
import reliability_server as rs  # noqa: E402

USERS_PER_TENANT_CONVERSATIONS = 10  # conversations per seeded user


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in [0, 100])."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


async def one_chat(server, user: dict, conversation_id: int, question: str, timeout: float) -> dict:
    from ws_client import open_chat, run_turn

    try:
        async with open_chat(server, conversation_id, user["session"]) as ws:
            turn = await run_turn(ws, question, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - counted as a failed reply
        return {"kind": "chat", "ok": False, "error": repr(exc)}
    end = turn.end or {}
    start = turn.frames[0] if turn.frames else {}
    return {"kind": "chat", "ok": end.get("type") == "done", "ttft": turn.ttft, "text": turn.text,
            "message_id": start.get("message_id"), "starts": turn.count("start"), "dones": turn.count("done"),
            "errors": turn.count("error"), "end": end, "tokens": (end.get("usage") or {}).get("completion_tokens"),
            "seconds": (turn.ended_at or time.monotonic()) - turn.sent_at}


async def one_stream(http, server, key: str, question: str, timeout: float) -> dict:
    import api_client

    body = {"model": "quick", "messages": [{"role": "user", "content": question}], "logprobs": True,
            "stream_options": {"include_usage": True}}
    try:
        s = await api_client.stream(http, server, "chat/completions", body, key, timeout=timeout)
    except Exception as exc:  # noqa: BLE001
        return {"kind": "stream", "ok": False, "error": repr(exc)}
    chunks = [e for e in s.events if isinstance(e, dict)]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices") and c["choices"][0].get(
        "finish_reason")]
    usage = next((c["usage"] for c in chunks if c.get("usage")), None)
    logprob_tokens = sum(len((c["choices"][0].get("logprobs") or {}).get("content") or [])
                         for c in chunks if c.get("choices"))
    roles = [c for c in chunks if c.get("choices") and c["choices"][0]["delta"].get("role")]
    ok = (s.status == 200 and len(roles) == 1 and finishes == ["length"] and usage is not None
          and s.events[-1] == "[DONE]" and s.events.count("[DONE]") == 1 and not any("error" in c for c in chunks))
    return {"kind": "stream", "ok": ok, "ttft": s.ttft, "id": s.id, "status": s.status, "finishes": finishes,
            "tokens": usage["completion_tokens"] if usage else None, "logprob_tokens": logprob_tokens,
            "text": api_client.text_of(s), "seconds": time.monotonic() - s.sent_at, "error": s.error}


def chat_users(server, num_chats: int) -> list[dict]:
    """The users whose seeded conversations the chat sockets use: the first ones of each tenant."""
    num = math.ceil(num_chats / 2 / USERS_PER_TENANT_CONVERSATIONS)
    return [u for slug in ("acme", "globex") for u in [u for u in server.users if u["tenant"] == slug][:num]]


def login_users(server, num_chats: int, num_logins: int) -> list[dict]:
    """The users who log in through the form: the others (their "New chat" is a conversation of their own)."""
    taken = {u["username"] for u in chat_users(server, num_chats)}
    return [u for u in server.users if u["username"] not in taken][:num_logins]


async def one_round(server, num_chats: int, num_streams: int, round_no: int, timeout: float,
                    num_logins: int = 0) -> tuple[list, float]:
    import api_client
    import burst

    slots = [(u, c) for u in chat_users(server, num_chats) for c in u["conversations"]][:num_chats]
    keys = ["acme", "globex"]
    started = time.monotonic()
    async with api_client.client(num_streams + 4) as http:
        jobs = [one_chat(server, user, conv, f"Round {round_no}, question {i}: what is {i} plus {round_no}?",
                         timeout) for i, (user, conv) in enumerate(slots)]
        jobs += [one_stream(http, server, keys[i % 2], f"Round {round_no}, request {i}: name a colour.", timeout)
                 for i in range(num_streams)]
        jobs += [burst.one_employee(server, u["username"], "pw", f"Round {round_no}: hello, what is 2 plus {i}?",
                                    timeout) for i, u in enumerate(login_users(server, num_chats, num_logins))]
        results = await asyncio.gather(*jobs)
    return results, time.monotonic() - started


def verify(server, results: list[dict], max_tokens: int) -> dict:
    """Per-reply checks against what the server saved; returns the failure counts."""
    chats = [r for r in results if r["kind"] == "chat"]
    streams = [r for r in results if r["kind"] == "stream"]
    saved = {}
    ids = [r["message_id"] for r in chats if r.get("message_id")]
    if ids:
        rows = server.db.rows("SELECT id, content, status, num_output_tokens FROM tenants_message WHERE id IN (%s)"
                              % ",".join(str(i) for i in ids))
        saved = {row["id"]: row for row in rows}
    failures = {"chat_not_done": 0, "chat_frames_mismatch": 0, "chat_not_saved": 0, "chat_wrong_length": 0,
                "stream_failed": 0, "stream_tokens_mismatch": 0, "stream_no_usage_row": 0}
    for r in chats:
        if not r["ok"]:
            failures["chat_not_done"] += 1
            continue
        row = saved.get(r["message_id"])
        if r["starts"] != 1 or r["dones"] != 1 or r["errors"]:
            failures["chat_frames_mismatch"] += 1
        if row is None or row["status"] != "complete" or row["content"] != r["text"]:
            failures["chat_not_saved"] += 1  # lost or repeated delta frames show up here as a text mismatch
        if r["tokens"] != max_tokens or (row and row["num_output_tokens"] != max_tokens):
            failures["chat_wrong_length"] += 1
    stream_ids = [r["id"] for r in streams if r.get("id")]
    usage_rows = {}
    if stream_ids:
        rows = server.db.rows("SELECT request_id, status_code, num_output_tokens FROM tenants_apiusage "
                              "WHERE request_id IN (%s)" % ",".join(f"'{i}'" for i in stream_ids))
        usage_rows = {row["request_id"]: row for row in rows}
    for r in streams:
        if not r["ok"]:
            failures["stream_failed"] += 1
            continue
        if not (r["tokens"] == r["logprob_tokens"] == max_tokens):
            failures["stream_tokens_mismatch"] += 1  # a lost or repeated chunk changes the count
        row = usage_rows.get(r["id"])
        if row is None or row["status_code"] != 200 or row["num_output_tokens"] != max_tokens:
            failures["stream_no_usage_row"] += 1
    return failures


def figures(results: list[dict], wall_s: float) -> dict:
    def ms(values):
        return {"p50": round(percentile(values, 50) * 1000) if values else None,
                "p99": round(percentile(values, 99) * 1000) if values else None,
                "max": round(max(values) * 1000) if values else None}

    results = [r for r in results if r["kind"] != "login"]  # burst.figures times those
    ttft = {kind: [r["ttft"] for r in results if r["kind"] == kind and r.get("ttft") is not None]
            for kind in ("chat", "stream")}
    tokens = sum(r.get("tokens") or 0 for r in results if r["ok"])
    return {"wall_s": round(wall_s, 1), "num_ok": sum(1 for r in results if r["ok"]), "num": len(results),
            "ttft_ms_chat": ms(ttft["chat"]), "ttft_ms_stream": ms(ttft["stream"]),
            "ttft_ms_all": ms(ttft["chat"] + ttft["stream"]), "output_tokens": tokens,
            "output_tokens_per_s": round(tokens / wall_s, 1), "replies_per_s": round(len(results) / wall_s, 2)}


def run(args) -> dict:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    rs.setup_django()
    folder = Path(args.folder or tempfile.mkdtemp(prefix="pagoda-load-"))
    num_users = math.ceil(args.chats / 2 / USERS_PER_TENANT_CONVERSATIONS) + math.ceil(args.logins / 2)
    engine_config = json.loads(args.engine_config)
    report: dict = {"args": vars(args), "rounds": []}
    log = print if not args.quiet else (lambda *a, **k: None)
    log(f"starting the server (model {args.model or 'smollm2-135m-instruct'}, engine {engine_config}) ...")
    with rs.running_server(folder, args.model or rs.default_model_path(), engine_config=engine_config,
                           database_url=args.database_url, daphne_args=args.daphne_arg,
                           seed={"num_users": num_users, "num_conversations": USERS_PER_TENANT_CONVERSATIONS,
                                 "max_tokens": args.max_tokens}) as server:
        warm, _ = asyncio.run(one_round(server, 4, 4, 0, args.timeout))
        stats = server.wait_idle(args.timeout)
        report["rss_mb_after_warmup"] = round(server.rss_mb(), 1)
        report["num_blocks_total"] = stats["num_blocks_total"]
        report["num_blocks_pinned"] = stats["num_blocks_pinned"]
        log(f"warm-up: {sum(r['ok'] for r in warm)}/8 ok; RSS {report['rss_mb_after_warmup']} MiB; "
            f"{stats['num_blocks_total']} KV blocks, {stats['num_blocks_pinned']} pinned")
        for round_no in range(1, args.rounds + 1):
            before = server.engine_stats()["stats"]
            results, wall_s = asyncio.run(one_round(server, args.chats, args.streams, round_no, args.timeout,
                                                    args.logins))
            stats = server.wait_idle(args.timeout)
            time.sleep(1.0)  # the last usage rows are written just after the streams end
            logins = [r for r in results if r["kind"] == "login"]
            failures = verify(server, results, args.max_tokens)
            if logins:
                failures |= burst.verify(server, logins, args.max_tokens)
            entry = {"round": round_no, **figures(results, wall_s), "failures": failures,
                     **({"logins": burst.figures(logins, wall_s)} if logins else {}),
                     "rss_mb_after": round(server.rss_mb(), 1), "leaked_blocks": rs.leaked_blocks(stats),
                     "num_running_after": stats["num_running"], "num_waiting_after": stats["num_waiting"],
                     "num_preemptions": stats["num_preemptions"] - before["num_preemptions"],
                     "errors": [r.get("error") or r.get("end") for r in results if not r["ok"]][:5]}
            report["rounds"].append(entry)
            log(json.dumps(entry))
        report["alive"] = server.alive() and server.health()[0] == 200
    rss = [report["rss_mb_after_warmup"]] + [r["rss_mb_after"] for r in report["rounds"]]
    report["rss_growth_mb_last_round"] = round(rss[-1] - rss[-2], 1)
    report["ok"] = report["alive"] and all(
        r["num_ok"] == r["num"] and not any(r["failures"].values()) and r["leaked_blocks"] == 0
        and r["num_running_after"] == r["num_waiting_after"] == 0 for r in report["rounds"])
    return report


def parse_args(argv: list[str] | None = None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--logins", type=int, default=0,
                        help="employees who also log in through the form at the same moment, each opening "
                             "a new chat and sending one message (burst.py)")
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds one reply may take")
    parser.add_argument("--model", default=None, help="a model folder (default: the embedded SmolLM2)")
    parser.add_argument("--engine-config", default="{}", help="PAGODA_ENGINE_CONFIG for the server (JSON)")
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--folder", default=None, help="where the server's database and log go")
    parser.add_argument("--daphne-arg", action="append", default=[],
                        help="passed to daphne, e.g. --daphne-arg=--websocket_connect_timeout=30")
    parser.add_argument("--json", default=None, help="write the report here")
    parser.add_argument("--quiet", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "args"}, indent=2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
