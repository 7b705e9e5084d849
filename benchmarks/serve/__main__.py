"""python -m benchmarks.serve [--sweep] [--device cpu|cuda] [--url URL --api-key KEY] ...  (see __init__.py)

    python -m benchmarks.serve --sweep                                  # GPU: 8B shape, 512 / 128, c = 1, 64, 256
    python -m benchmarks.serve --device cpu --input-len 64 --output-len 32 --max-concurrency 32
    python -m benchmarks.serve --max-concurrency 256 --request-rate 8,16,24 --endpoints completions
    python -m benchmarks.serve --url http://host:8000 --api-key KEY --model chat --endpoints completions,chat
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .clients import ChatLogin, HttpSession, chat_turn, http_backend, stream_api
from .load import run_load
from .report import probe_rows, run_rows, targets
from .stats import summarize

SWEEP_CONCURRENCY = (1, 64, 256)
ENDPOINTS = ("completions", "chat", "ws")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.serve")
    ap.add_argument("--url", help="a running server (default: start one, as deploy/run.sh does)")
    ap.add_argument("--api-key", help="--url: a key of a tenant with no system prompt")
    ap.add_argument("--pinned-api-key", help="--url: a key of a tenant whose system prompt is pinned (the probe)")
    ap.add_argument("--username", help="--url: a chat user of the --api-key tenant (the WebSocket endpoint)")
    ap.add_argument("--password")
    ap.add_argument("--tenant", default="bench", help="the chat user's tenant slug (default bench)")
    ap.add_argument("--model", default="bench", help="the sampling profile requests name (default bench)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--model-path", help="a model folder or built-in name for the server (default: a random-weight "
                                         "Llama-3-8B shape on the GPU, a tiny Llama on the CPU, written once)")
    ap.add_argument("--model-dir", help="where the random-weight model is written (default ~/.cache/pagoda/servebench)")
    ap.add_argument("--tokenizer-from", help="folder with SmolLM2's tokenizer files (default: its converted cache)")
    ap.add_argument("--engine-config", default="{}", help="JSON EngineConfig fields for the server and the engine")
    ap.add_argument("--database-url", help="the started server's DATABASE_URL (default a SQLite file, as run.sh)")
    ap.add_argument("--input-len", type=int, default=512)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--num-prompts", type=int, help="per run (default max(10, 4 x concurrency))")
    ap.add_argument("--max-concurrency", type=int, default=64)
    ap.add_argument("--request-rate", default="inf", help="Poisson arrivals per second; a comma list runs each")
    ap.add_argument("--endpoints", default=",".join(ENDPOINTS), help="comma list of completions, chat, ws")
    ap.add_argument("--sweep", action="store_true", help="concurrency 1, 64, 256 (--sweep-concurrency to change)")
    ap.add_argument("--sweep-concurrency", default=",".join(map(str, SWEEP_CONCURRENCY)))
    ap.add_argument("--no-engine", action="store_true", help="skip the offline engine")
    ap.add_argument("--no-probe", action="store_true", help="skip the pinned-vs-cold probe")
    ap.add_argument("--system-len", type=int, default=2000)
    ap.add_argument("--question-len", type=int, default=50)
    ap.add_argument("--probe-repeats", type=int, default=10)
    ap.add_argument("--probe-background", type=int, default=32, help="streams decoding beside the busy probe (0: none)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--web-processes", type=int, default=1,
                    help="web processes sharing the engine core (PAGODA_WEB_PROCESSES; python -m pagoda.serve)")
    ap.add_argument("--work-dir", help="the started server's database and log (default: a temporary folder)")
    ap.add_argument("--out", help="write every figure as JSON here")
    args = ap.parse_args(argv)
    args.endpoints = [e.strip() for e in args.endpoints.split(",") if e.strip()]
    unknown = set(args.endpoints) - set(ENDPOINTS)
    if unknown:
        ap.error(f"unknown endpoints {sorted(unknown)}: choose from {', '.join(ENDPOINTS)}")
    try:
        args.rates = [float(r) for r in args.request_rate.split(",")]
        args.engine_config = json.loads(args.engine_config)
        concurrency = [int(c) for c in args.sweep_concurrency.split(",")] if args.sweep else [args.max_concurrency]
    except ValueError as exc:
        ap.error(str(exc))
    if any(r <= 0 for r in args.rates) or any(c < 1 for c in concurrency) or min(args.input_len, args.output_len) < 1:
        ap.error("rates, concurrency, --input-len and --output-len must be positive")
    args.concurrency = concurrency
    if args.url and not args.api_key:
        ap.error("--url needs --api-key")
    if args.url and "ws" in args.endpoints and not (args.username and args.password):
        ap.error("--url with the ws endpoint needs --username and --password")
    return args


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def prepare_model(args, device: str) -> str:
    """The server's model: --model-path, or a random-weight folder sized for this device."""
    if args.model_path:
        return args.model_path
    from .model_folder import default_tokenizer_dir, shape_for_device, write_model_folder

    total = None
    if device == "cuda":
        import torch

        total = torch.cuda.get_device_properties(0).total_memory
    shape = shape_for_device(device, total)
    name = "llama3-8b-shape" if device == "cuda" else "tiny-llama"
    if shape["num_hidden_layers"] != 32 and device == "cuda":
        name += f"-{shape['num_hidden_layers']}-layers"
        print(f"# the card holds {total / 2**30:.0f} GiB: {shape['num_hidden_layers']} layers instead of 32")
    folder = Path(args.model_dir or Path.home() / ".cache" / "pagoda" / "servebench") / name
    t0 = time.perf_counter()
    write_model_folder(folder, shape, Path(args.tokenizer_from or default_tokenizer_dir()),
                       dtype="bfloat16" if device == "cuda" else "float32", device=device)
    print(f"# model folder {folder} ({time.perf_counter() - t0:.0f}s)", flush=True)
    return str(folder)


class Prompts:
    """Random-token prompts: token ids for /v1/completions, their decoded text for the chat endpoints."""

    def __init__(self, tokenizer, seed: int):
        from .model_folder import FIRST_TEXT_ID

        self.tokenizer, self.rng = tokenizer, random.Random(seed)
        self.low, self.high = FIRST_TEXT_ID, len(tokenizer)

    def ids(self, n: int) -> list[int]:
        return [self.rng.randrange(self.low, self.high) for _ in range(n)]

    def text(self, n: int) -> str:
        # set_system_prompt --file reads the prompt in text mode, which turns "\r" into "\n": the engine's
        # side of the probe must see the text the platform pinned.
        text = chat_text(self.tokenizer.decode(self.ids(n), skip_special_tokens=True))
        return text.replace("\r\n", "\n").replace("\r", "\n")


def chat_text(text: str) -> str:
    """Decoded random tokens as a chat message: without NUL, which the chat socket drops from every
    message (PostgreSQL cannot store it), so the engine's side must not see it either. One token of
    SmolLM2's vocabulary decodes to NUL: about 1 in 100 prompts of 512 random tokens holds it."""
    return text.replace("\x00", "")


class Target:
    """What the runs talk to: the started server, or --url."""

    def __init__(self, url: str, api_key: str, pinned_api_key: str | None, model: str, username: str | None,
                 password: str | None, tenant: str):
        self.url, self.api_key, self.pinned_api_key, self.model = url, api_key, pinned_api_key, model
        self.username, self.password, self.tenant = username, password, tenant
        self.conversations: list[int] = []  # untouched conversations made ahead (the started server's)
        self._login: ChatLogin | None = None

    def login(self) -> ChatLogin:
        if self._login is None:
            self._login = ChatLogin(self.url, self.username, self.password, self.tenant)
        return self._login


async def run_endpoint(target: Target, endpoint: str, ids: list[list[int]], texts: list[str], output_len: int,
                       concurrency: int | None, rate: float, seed: int) -> tuple[list, float]:
    if endpoint == "ws":
        login = target.login()
        lock = asyncio.Lock()

        async def send(i: int):
            if target.conversations:
                conversation = target.conversations.pop()
                return await chat_turn(target.url, login.session, conversation, texts[i], target.model)
            # --url: "New chat" hands out the same untouched conversation until a turn is saved in it, so
            # one request at a time gets its conversation and starts its turn.
            async with lock:
                conversation = await asyncio.to_thread(login.new_conversation)
                started = asyncio.Event()
                task = asyncio.create_task(chat_turn(target.url, login.session, conversation, texts[i],
                                                     target.model, started=started))
                await started.wait()
            return await task

        return await run_load(send, len(texts), concurrency, rate, seed)
    async with HttpSession(target.url, concurrency or len(ids)) as session:
        async def send(i: int):
            payload = ids[i] if endpoint == "completions" else [{"role": "user", "content": texts[i]}]
            return await stream_api(session, endpoint, payload, target.api_key, target.model, output_len)

        return await run_load(send, len(ids), concurrency, rate, seed)


def plan_runs(args) -> list[dict]:
    runs = []
    for conc in args.concurrency:
        for rate in args.rates:
            for endpoint in args.endpoints:
                runs.append({"endpoint": endpoint, "concurrency": conc, "request_rate": rate,
                             "num_prompts": args.num_prompts or max(10, 4 * conc)})
    return runs


def serve_phase(args, target: Target, runs: list[dict], prompts: Prompts) -> tuple[dict, dict | None]:
    """Every run against the server, then the probe. Returns (workload prompts by key, API probe)."""
    workloads: dict[str, dict] = {}
    # One prompt set per concurrency: every endpoint (and the engine) serves the same prompts.
    for run in runs:
        key = f"c{run['concurrency']}"
        if key not in workloads:
            ids = [prompts.ids(args.input_len) for _ in range(run["num_prompts"])]
            workloads[key] = {"ids": ids, "texts": [chat_text(prompts.tokenizer.decode(p)) for p in ids]}
        run["prompts"] = key
    print(f"# warm-up on {', '.join(args.endpoints)}", flush=True)
    warm = workloads[runs[0]["prompts"]]
    for endpoint in args.endpoints:
        results, _ = asyncio.run(run_endpoint(target, endpoint, warm["ids"][:2], warm["texts"][:2],
                                              args.output_len, 2, math.inf, args.seed))
        bad = [r.error for r in results if not r.ok]
        if bad:
            raise RuntimeError(f"warm-up on {endpoint} failed: {bad[0]}")
    for run in runs:
        w = workloads[run["prompts"]]
        results, seconds = asyncio.run(run_endpoint(target, run["endpoint"], w["ids"], w["texts"], args.output_len,
                                                    run["concurrency"], run["request_rate"], args.seed))
        run["server"] = summarize(results, seconds)
        run["server"]["prompt_tokens_each"] = [r.prompt_tokens for r in results]
        s = run["server"]
        print(f"  server {run['endpoint']} c={run['concurrency']} rate={run['request_rate']:g}: "
              f"{s['output_throughput']:,.1f} tok/s, {s['completed']} ok, {s['failed']} failed", flush=True)
    api_probe = None
    if not args.no_probe and target.pinned_api_key:
        from .probe import run_probe

        probe = args.probe_spec
        api_probe = asyncio.run(run_probe(
            target.url, target.pinned_api_key, target.api_key, target.model, args.system_len, probe["questions"],
            probe["cold_systems"], args.probe_background, probe["background_prompts"],
            probe["background_output_len"]))
        print(f"  server probe: {api_probe}", flush=True)
    return workloads, api_probe


def engine_phase(args, model: str, device: str, runs: list[dict], workloads: dict, work_dir: Path) -> dict:
    """The offline engine on the same prompts (closed-loop runs only), in its own process."""
    spec_workloads = []
    for run in runs:
        if run["request_rate"] != math.inf:
            continue
        w = workloads[run["prompts"]]
        chat = run["endpoint"] != "completions"
        name = f"{'chat' if chat else 'ids'}-c{run['concurrency']}"
        run["engine_workload"] = name
        if all(s["name"] != name for s in spec_workloads):
            prompts = [[{"role": "user", "content": t}] for t in w["texts"]] if chat else w["ids"]
            spec_workloads.append({"name": name, "prompts": prompts, "concurrency": run["concurrency"]})
    spec = {"model": model, "device": device, "engine_config": args.engine_config, "output_len": args.output_len,
            "workloads": spec_workloads, "probe": None if args.no_probe else args.probe_spec}
    spec_path, out_path = work_dir / "engine_spec.json", work_dir / "engine_out.json"
    spec_path.write_text(json.dumps(spec))
    print("# the offline engine (its own process)", flush=True)
    done = subprocess.run([sys.executable, "-m", "benchmarks.serve.engine_run", str(spec_path), str(out_path)],
                          cwd=Path(__file__).resolve().parents[2])
    if done.returncode != 0:
        raise RuntimeError(f"the offline engine run failed ({done.returncode})")
    return json.loads(out_path.read_text())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"# python -m benchmarks.serve {' '.join(argv if argv is not None else sys.argv[1:])}")
    device = resolve_device(args.device) if not args.url else args.device
    card = platform.machine()
    if device == "cuda":
        import torch

        card = torch.cuda.get_device_name(0)
    print(f"# device {device} ({card}), HTTP client {http_backend()}, {time.strftime('%Y-%m-%d')}, "
          f"engine config {json.dumps(args.engine_config)}", flush=True)
    work_dir = Path(args.work_dir or tempfile.mkdtemp(prefix="servebench-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    model = prepare_model(args, device) if not args.url else args.model_path
    from transformers import AutoTokenizer

    from inference.model_loader import resolve_model_path  # a built-in name's folder too

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(model) if model else args.tokenizer_from)
    prompts = Prompts(tokenizer, args.seed)
    n = max(1, args.probe_repeats)
    args.probe_spec = {"system": prompts.text(args.system_len),
                       "questions": [prompts.text(args.question_len) for _ in range(n)],
                       "cold_systems": [prompts.text(args.system_len) for _ in range(n)],
                       "num_background": args.probe_background,
                       "background_prompts": [prompts.ids(args.input_len) for _ in range(max(1, args.probe_background))],
                       "background_output_len": max(args.output_len, 1024)}
    runs = plan_runs(args)
    server = None
    if args.url:
        target = Target(args.url, args.api_key, args.pinned_api_key, args.model, args.username, args.password,
                        args.tenant)
    else:
        from .server import start_server

        t0 = time.perf_counter()
        server = start_server(work_dir / "server", model, device, engine_config=args.engine_config,
                              output_len=args.output_len, system_prompt=args.probe_spec["system"],
                              num_conversations=2 + sum(r["num_prompts"] for r in runs if r["endpoint"] == "ws"),
                              database_url=args.database_url, web_processes=args.web_processes)
        print(f"# server {server.url} ready in {time.perf_counter() - t0:.0f}s (log {server.log_path})", flush=True)
        target = Target(server.url, server.api_key, server.pinned_api_key, server.profile, server.username,
                        server.password, "bench")
        target.conversations = list(server.conversations)
    try:
        workloads, api_probe = serve_phase(args, target, runs, prompts)
    finally:
        if target._login is not None:
            target._login.close()
        if server is not None:
            server.stop()
    engine_out = None
    if not args.no_engine and not args.url:
        engine_out = engine_phase(args, model, device, runs, workloads, work_dir)
        for run in runs:
            e = engine_out["workloads"].get(run.get("engine_workload", ""))
            if e:
                run["engine"] = e
                # Both sides must have served the same token ids (the chat template applied alike).
                run["same_prompt_tokens"] = all(
                    a == b for a, b in zip(run["server"]["prompt_tokens_each"], e["prompt_tokens_each"]) if a)
                if not run["same_prompt_tokens"]:
                    print(f"! {run['endpoint']} c={run['concurrency']}: the server's prompt token counts "
                          f"{run['server']['prompt_tokens_each']} differ from the engine's {e['prompt_tokens_each']}",
                          flush=True)
                if e["output_throughput"]:
                    run["ratio"] = run["server"]["output_throughput"] / e["output_throughput"]
    engine_probe = engine_out["probe"] if engine_out else None
    print()
    print(f"## python -m benchmarks.serve: {card}, {args.input_len} in / {args.output_len} out, "
          f"{time.strftime('%Y-%m-%d')}")
    print(run_rows(runs))
    if api_probe or engine_probe:
        print()
        print(probe_rows(api_probe, engine_probe))
    print()
    for line in targets(runs, api_probe, engine_probe):
        print(f"- {line}")
    if args.out:
        for run in runs:
            for side in ("server", "engine"):
                if side in run:
                    run[side] = {k: v for k, v in run[side].items() if k != "prompt_tokens_each"}
        Path(args.out).write_text(json.dumps({"device": device, "card": card, "args": {
            k: v for k, v in vars(args).items() if k not in ("probe_spec",)}, "runs": runs,
            "probe": {"api": api_probe, "engine": engine_probe}}, indent=1, default=str))
    failed = sum(r["server"]["failed"] for r in runs)
    return 1 if failed and failed == sum(r["server"]["num_requests"] for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
