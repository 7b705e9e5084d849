import json
import os
import urllib.error
import urllib.request

from django.core.management.base import BaseCommand, CommandError

import engine_runtime
from console import panels


class Command(BaseCommand):
    help = (
        "Show the engine's numbers (requests, KV blocks, prefix cache, pins). By default asks the running "
        "server; --local loads an engine in this process instead (pins the active prompts, then reports)."
    )

    def add_arguments(self, parser):
        port = os.environ.get("PORT", "8000")
        parser.add_argument("--url", default=f"http://127.0.0.1:{port}", help="the server (default %(default)s)")
        parser.add_argument("--local", action="store_true", help="load the engine here instead of asking the server")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print raw JSON")

    def handle(self, *args, url, local, as_json, **options):
        data = self._local() if local else self._remote(url)
        if as_json:
            self.stdout.write(_dumps(data))
        else:
            self._print(data)

    def _remote(self, url: str) -> dict:
        request = urllib.request.Request(
            url.rstrip("/") + "/console/engine/stats.json", headers={panels.STATS_TOKEN_HEADER: panels.stats_token()}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.load(response)
        except (urllib.error.URLError, OSError) as exc:
            raise CommandError(f"cannot reach the server at {url} ({exc}); is it running? (or use --local)") from exc

    def _local(self) -> dict:
        started_here = engine_runtime.peek() is None
        try:
            engine_runtime.get_engine()  # starts it (unless PAGODA_ENGINE=off) and pins the active prompts
            return panels.engine_stats()
        except engine_runtime.EngineUnavailable as exc:
            raise CommandError(exc.reason) from exc
        finally:
            if started_here:
                engine_runtime.shutdown()

    def _print(self, data: dict) -> None:
        engine = data["engine"]
        self.stdout.write(f"engine: {engine['state']}  model: {engine['model']}  context: {engine['max_model_len']}")
        if engine.get("error"):
            self.stdout.write(f"error: {engine['error']}")
        for key, value in (data.get("stats") or {}).items():
            self.stdout.write(f"  {key:<26} {value}")
        for tenant, numbers in (data.get("per_tenant") or {}).items():
            self.stdout.write(f"  tenant {tenant}: {_dumps(numbers, indent=None)}")
        for key, pin in (data.get("pins") or {}).items():
            self.stdout.write(f"  pin {key}: {pin['num_tokens']} tokens, {pin['num_blocks']} blocks")


def _dumps(data, indent: int | None = 2) -> str:
    return json.dumps(data, indent=indent, default=str)
