"""Where an idle streamed call's time goes before its first token: python -m benchmarks.serve.webpath

    python -m benchmarks.serve.webpath --device cpu            # the tiny random model, a minute or two
    python -m benchmarks.serve.webpath --device cuda --repeats 50

The server's ASGI application runs in this process (no daphne, no socket), over a database seeded as
benchmarks.serve seeds it, with the engine core in its child process as the server runs it. Each
request is a pinned chat turn (the tenant's 2,000-token system prompt is pinned, the client sends a
50-token question, one output token) or a /v1/completions call of `--input-len` token ids. Two routes,
interleaved request by request so that both see the same machine load, median of `--repeats`:

- `pages`: Django's own ASGI handler with every page middleware, reading key, profile, prompt and
  budgets from the database on every call (PAGODA_API_CACHE_SECONDS=0): the server before api.asgi
  and pagoda.ttl_cache;
- `api`: pagoda.asgi.application, as daphne runs it, in steady state (the key's first call is done).

Rows: `asgi chat` / `asgi completions`, the whole call from the application's call to its first body
bytes (the API sends nothing before the first token); then each step of the call's path on its own,
in the order the API runs them: key auth, profile + system prompt, prompt tokens, budget reservation,
the engine's first delta through AsyncLLM (add -> core -> reader thread -> this loop); `engine ttft`,
the core's own TTFT (StreamDelta.metrics), so `first delta - engine ttft` is the hop to the core and
back; `usage row`, what ApiCall.finish writes once the call ended. `asgi chat` minus the steps is
what the web framework adds (middleware, routing, parsing, thread hops). A client through daphne
adds its HTTP layer on top (benchmarks.serve's probe measures that). The `, CPU` rows are the CPU
time this process (every thread of it; the engine core is another process) spent from a call's
start to its first body bytes: on a busy machine, where wall times wander, they still compare.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

from .server import ROOT, seed_database, server_env


def _asgi_scope(path: str, api_key: str, body: bytes) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {api_key}".encode()),
                        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}


async def asgi_call(app, path: str, api_key: str, payload: dict) -> tuple[float, float, int]:
    """(seconds from the call to the first body bytes, CPU seconds this process spent meanwhile, status)."""
    body = json.dumps(payload).encode()
    sent = False
    first: float | None = None
    status = 0
    cpu_first: float | None = None
    done = asyncio.Event()

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        nonlocal first, cpu_first, status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            # The API answers nothing before the engine's first delta is in (EngineRun.start), so the
            # first body bytes are the first token's.
            if first is None and message.get("body"):
                first, cpu_first = time.perf_counter(), time.process_time()
            if not message.get("more_body", False):
                done.set()

    t0, cpu0 = time.perf_counter(), time.process_time()
    await app(_asgi_scope(path, api_key, body), receive, send)
    return (first or time.perf_counter()) - t0, (cpu_first or time.process_time()) - cpu0, status


def _median_ms(values: list[float]) -> float:
    return 1e3 * statistics.median(values)


STEPS = ("auth", "profile + prompt", "prompt tokens", "budget", "first delta")
ROWS = ("asgi chat", *STEPS, "engine ttft", "usage row", "asgi completions", "asgi chat, CPU",
        "asgi completions, CPU")
# "pages": Django's own handler with every page middleware, reading the database on every call (the
# server before api.asgi and pagoda.ttl_cache); "api": the server's route today.
MODES = {"pages": 0.0, "api": None}


async def measure(args, seeded: dict, questions: list[str], id_prompts: list[list[int]]) -> dict:
    """{mode: {row: median ms}}, the modes interleaved request by request (same load on both)."""
    from django.conf import settings

    import engine_runtime
    from api import completions, prompts
    from api.auth import authenticate_key
    from api.calls import ApiCall
    from api.schemas import ChatMessage
    from governance import budgets
    from inference import SamplingParams
    from pagoda import asgi

    apps = {"pages": asgi.django_asgi_app, "api": asgi.application}
    cache_seconds = settings.PAGODA_API_CACHE_SECONDS
    key_text = seeded["pinned_api_key"]
    model = seeded["profile"]
    engine = await engine_runtime.aget_engine(timeout=600)
    times = {mode: {row: [] for row in ROWS} for mode in MODES}

    def chat_body(q: str) -> dict:
        return {"model": model, "stream": True, "max_tokens": 1, "messages": [{"role": "user", "content": q}]}

    async def one(mode: str, i: int, q: str) -> None:
        # "pages" neither reads nor stores (a TTL of 0); "api" keeps what its earlier calls stored (its
        # steady state: one reload per key and PAGODA_API_CACHE_SECONDS).
        settings.PAGODA_API_CACHE_SECONDS = cache_seconds if MODES[mode] is None else MODES[mode]
        t = times[mode]
        seconds, cpu, status = await asgi_call(apps[mode], "/v1/chat/completions", key_text, chat_body(q))
        assert status == 200, status
        t["asgi chat"].append(seconds)
        t["asgi chat, CPU"].append(cpu)
        seconds, cpu, status = await asgi_call(apps[mode], "/v1/completions", seeded["api_key"], {
            "model": model, "stream": True, "max_tokens": 1, "prompt": id_prompts[i % len(id_prompts)]})
        assert status == 200, status
        t["asgi completions"].append(seconds)
        t["asgi completions, CPU"].append(cpu)

        start = time.perf_counter()
        key = await authenticate_key(key_text, "chat.completions")
        t["auth"].append(time.perf_counter() - start)
        start = time.perf_counter()
        _, system_prompt = await completions._aprofile_and_system_prompt(key.tenant, model)
        t["profile + prompt"].append(time.perf_counter() - start)
        start = time.perf_counter()
        ids = await asyncio.to_thread(prompts.chat_prompt_ids, engine, system_prompt,
                                      [ChatMessage(role="user", content=q)])
        t["prompt tokens"].append(time.perf_counter() - start)
        request_id = f"webpath-{secrets.token_hex(8)}"
        start = time.perf_counter()
        await budgets.areserve_api(key, request_id, len(ids) + 1)
        t["budget"].append(time.perf_counter() - start)
        start = time.perf_counter()
        stream = engine.generate(request_id, ids, SamplingParams(max_tokens=1, temperature=0.0),
                                 tenant=key.tenant.engine_key)
        delta = await anext(stream)
        t["first delta"].append(time.perf_counter() - start)
        t["engine ttft"].append(delta.metrics["first_token"] - delta.metrics["arrival"])
        await stream.aclose()
        call = ApiCall(key, "chat.completions", model=model, request_id=request_id)
        start = time.perf_counter()
        await call.finish()
        t["usage row"].append(time.perf_counter() - start)

    for q in questions[:3]:  # warm-up: imports, the first connection
        for mode in MODES:
            await one(mode, 0, q)
    times = {mode: {row: [] for row in ROWS} for mode in MODES}
    for i, q in enumerate(questions):
        for mode in (MODES if i % 2 == 0 else reversed(MODES)):
            await one(mode, i, q)
    settings.PAGODA_API_CACHE_SECONDS = cache_seconds
    return {mode: {row: _median_ms(values) for row, values in rows.items()} for mode, rows in times.items()}


def report(figures: dict) -> str:
    modes = list(figures)
    rows = [f"| phase (median ms) | {' | '.join(modes)} |", "|---|" + "---:|" * len(modes)]
    for name in ROWS:
        rows.append(f"| {name} | {' | '.join(f'{figures[m][name]:.2f}' for m in modes)} |")
    rest = [figures[m]["asgi chat"] - sum(figures[m][s] for s in STEPS) for m in modes]
    rows.append(f"| asgi chat minus the steps (framework, hops) | {' | '.join(f'{r:.2f}' for r in rest)} |")
    hop = [figures[m]["first delta"] - figures[m]["engine ttft"] for m in modes]
    rows.append(f"| first delta minus engine ttft (client <-> core) | {' | '.join(f'{h:.2f}' for h in hop)} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.serve.webpath")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--model-path", help="default: the random-weight model benchmarks.serve writes for the device")
    ap.add_argument("--model-dir")
    ap.add_argument("--tokenizer-from")
    ap.add_argument("--engine-config", default="{}")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--system-len", type=int, default=2000)
    ap.add_argument("--question-len", type=int, default=50)
    ap.add_argument("--input-len", type=int, default=64, help="token ids of each /v1/completions call")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work-dir")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args(argv)
    args.engine_config = json.loads(args.engine_config)
    from . import __main__ as serve

    model = serve.prepare_model(args, args.device)
    from transformers import AutoTokenizer

    prompts = serve.Prompts(AutoTokenizer.from_pretrained(model), args.seed)
    system = prompts.text(args.system_len)
    questions = [prompts.text(args.question_len) for _ in range(args.repeats)]
    id_prompts = [prompts.ids(args.input_len) for _ in range(args.repeats)]
    folder = Path(args.work_dir or tempfile.mkdtemp(prefix="webpath-"))
    folder.mkdir(parents=True, exist_ok=True)
    env = server_env(folder, model, args.device, args.engine_config, secrets.token_urlsafe(50), None)
    seeded = seed_database(folder, env, output_len=1, system_prompt=system, password=secrets.token_urlsafe(16))
    os.environ.update(env)
    for path in (str(ROOT / "platform"), str(ROOT)):
        if path not in sys.path:
            sys.path.insert(0, path)
    importlib.import_module("pagoda.asgi")  # starts the engine, which pins the tenant's prompt

    import engine_runtime

    engine_runtime.wait_ready(600)
    deadline = time.monotonic() + 600
    while "tenant:pinned" not in engine_runtime.peek().pins() and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        figures = asyncio.run(measure(args, seeded, questions, id_prompts))
    finally:
        engine_runtime.shutdown()
    print(f"## python -m benchmarks.serve.webpath --device {args.device}: one idle request at a time, "
          f"{args.repeats} repeats, {time.strftime('%Y-%m-%d')}")
    print(report(figures))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
