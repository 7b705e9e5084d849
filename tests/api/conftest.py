"""Fixtures of the API tests.

In-process tests (fast): Django's AsyncClient against the /v1 views, with FakeEngine standing in for
the engine (tokens are characters; the reply is fixed). They are sync tests that run each request
through async_to_sync, so the views' database work shares the test's transaction.

Live tests (`live` fixture): a real daphne server with the real engine on a tiny random model, once
per session (see api_live_server.py), driven with the official `openai` package.
"""
from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from api import ratelimit
from api import services as api_services
from engine_runtime import runtime
from inference import StreamDelta
from inference.errors import PromptTooLongError
from inference.logprobs import TokenLogprobs
from tenants import services
from tenants.models import SamplingProfile

import api_live_server as live_server  # a sibling module: the tests folders are not packages


@pytest.fixture(autouse=True)
def _isolated(settings):
    """No engine of its own, no pin watcher, per-process rate limits (reset for every test)."""
    settings.PAGODA_ENGINE = "off"
    settings.PAGODA_PIN_SYNC_SECONDS = 0
    settings.PAGODA_REDIS_URL = None
    ratelimit.reset_limiter()
    yield
    ratelimit.reset_limiter()


# --- the fake engine ---
class FakeTokenizer:
    """One token per character (its code point)."""

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return ([1] if add_special_tokens else []) + [ord(c) for c in text]

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(i) for i in ids if i > 1)

    def get_vocab(self) -> dict[str, int]:
        return {chr(i): i for i in range(32, 127)}  # every entry one character long


class FakeEngine:
    """AsyncLLM's request surface: generate() streams `reply` one character per delta.

    Records every request (prompt ids, params, tenant) in `requests`, and the ids of requests whose
    stream was left early in `aborted`. `fail_after` makes the stream fail after that many deltas.
    """

    model_name = "fake-model"
    max_model_len = 200

    def __init__(self):
        self.tokenizer = FakeTokenizer()
        self.reply = "Hello there!"
        self.requests: list[dict] = []
        self.aborted: list[str] = []
        self.fail_after: int | None = None
        self.raise_on_add: Exception | None = None
        self.num_cached_tokens = 0
        self.error = None

    def is_alive(self) -> bool:
        return True

    def encode_chat(self, messages: list[dict], add_generation_prompt: bool = True) -> list[int]:
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages) + ("<assistant>" if add_generation_prompt else "")
        return self.tokenizer.encode(text, add_special_tokens=False)

    def encode_system_prefix(self, system_prompt: str) -> list[int]:
        return self.encode_chat([{"role": "system", "content": system_prompt}], add_generation_prompt=False)

    def stats(self) -> dict:
        return {"num_running": 0, "num_waiting": 0, "per_tenant": {}}

    def pins(self) -> dict:
        return {}

    async def generate(self, request_id, prompt_token_ids, params, tenant=None):
        self.requests.append({"request_id": request_id, "prompt_token_ids": list(prompt_token_ids),
                              "params": params, "tenant": tenant})
        if len(prompt_token_ids) >= self.max_model_len:
            raise PromptTooLongError("too long", field="prompt")
        if self.raise_on_add is not None:
            raise self.raise_on_add
        num = min(len(self.reply), params.max_tokens or len(self.reply))
        finished = False
        try:
            for i in range(num):
                await asyncio.sleep(0)
                if self.fail_after is not None and i >= self.fail_after:
                    from inference.errors import EngineDeadError

                    raise EngineDeadError("engine loop crashed: boom")
                finished = i == num - 1
                reason = ("stop" if num == len(self.reply) else "length") if finished else None
                token = ord(self.reply[i])
                logprobs = None
                if params.logprobs is not None:
                    logprobs = [{token: -0.25, **{ord("a") + k: -1.0 - k for k in range(params.logprobs)}}]
                yield StreamDelta(request_id, self.reply[i], [token], finished, reason, len(prompt_token_ids),
                                  self.num_cached_tokens, i + 1, logprobs=logprobs,
                                  prompt_logprobs=fake_prompt_logprobs(prompt_token_ids, params) if i == 0 else None)
        finally:
            if not finished:
                self.aborted.append(request_id)


def fake_prompt_logprobs(prompt_token_ids: list[int], params) -> list | None:
    """With params.prompt_logprobs: token i scores -i / 10 at rank i (token 0 has none), with "a", "b", ...
    as the k likeliest."""
    if params.prompt_logprobs is None:
        return None
    entries = [None]
    for i, token in enumerate(prompt_token_ids[1:], start=1):
        alternatives = {ord("a") + k: -0.01 * (k + 1) for k in range(params.prompt_logprobs)}
        entries.append(TokenLogprobs({token: -i / 10, **alternatives}, rank=i))
    return entries


@pytest.fixture
def fake_engine(monkeypatch):
    engine = FakeEngine()
    monkeypatch.setattr(runtime, "_engine", engine)
    monkeypatch.setattr(runtime, "_state", "ready")
    return engine


# --- tenants and keys ---
@pytest.fixture
def tenant(db):
    tenant = services.create_tenant(name="Acme", slug="acme")
    services.save_profile(SamplingProfile(tenant=tenant, name="terse", temperature=0.0, max_tokens=5))
    return tenant


@pytest.fixture
def other_tenant(db):
    tenant = services.create_tenant(name="Globex", slug="globex")
    services.save_profile(SamplingProfile(tenant=tenant, name="globex-only", max_tokens=5))
    return tenant


@pytest.fixture
def make_key():
    def make(tenant, name: str = "tool", **limits):
        key, plaintext = api_services.create_api_key(tenant, name, **limits)
        return key, plaintext

    return make


@pytest.fixture
def make_user(django_user_model):
    return lambda username: django_user_model.objects.create_user(username=username, password="pw")


@pytest.fixture
def key(tenant, make_key):
    return make_key(tenant)[1]


class Api:
    """Calls /v1 in-process; each call runs on its own event loop via async_to_sync."""

    def __init__(self):
        self.client = AsyncClient()

    def _headers(self, key: str | None) -> dict:
        return {"Authorization": f"Bearer {key}"} if key else {}

    def post(self, path: str, body: dict | str, key: str | None, headers: dict | None = None):
        """POST a JSON body (a str is sent as it is); `headers` replace the Authorization header."""
        return async_to_sync(self.client.post)(f"/v1/{path}", data=body, content_type="application/json",
                                               headers=self._headers(key) if headers is None else headers)

    def get(self, path: str, key: str | None):
        return async_to_sync(self.client.get)(f"/v1/{path}", headers=self._headers(key))

    def stream(self, path: str, body: dict, key: str | None, max_events: int | None = None):
        """POST with stream=true; returns (response, events). With max_events, stops reading (and closes
        the stream, as a server does when the client disconnects) after that many events."""

        async def run():
            response = await self.client.post(f"/v1/{path}", data={**body, "stream": True},
                                              content_type="application/json", headers=self._headers(key))
            if not response.streaming:
                return response, []
            events = []
            iterator = aiter(response)  # as Django's ASGI handler reads it (and closes it on a disconnect)
            try:
                async for chunk in iterator:
                    for line in chunk.decode().split("\n\n"):
                        if line.startswith("data: "):
                            payload = line.removeprefix("data: ")
                            events.append(payload if payload == "[DONE]" else json.loads(payload))
                    if max_events is not None and len(events) >= max_events:
                        break
            finally:
                await iterator.aclose()
            return response, events

        return async_to_sync(run)()


@pytest.fixture
def api():
    return Api()


# --- the live server ---
@pytest.fixture(scope="session")
def live(tmp_path_factory, tiny_llama_path):
    """A running server with the real engine (session-wide; see api_live_server.py)."""
    from django.conf import settings

    from console import panels

    folder = tmp_path_factory.mktemp("live-server")
    db_settings = settings.DATABASES["default"]
    scratch = None
    if db_settings["ENGINE"].endswith("postgresql"):
        scratch = live_server.PostgresScratch(db_settings)
        database_url = scratch.create()
    else:
        database_url = f"sqlite:///{folder / 'live.sqlite3'}"
    env = live_server.server_env(database_url, str(tiny_llama_path), folder, settings.SECRET_KEY)
    seeded = live_server.seed(env)
    process, url = live_server.start(env, folder / "server.log")
    server = live_server.LiveServer(url=url, keys=seeded["keys"], prompts=seeded["prompts"],
                                    db=live_server.LiveDb(database_url),
                                    stats_headers={panels.STATS_TOKEN_HEADER: panels.stats_token()},
                                    log_path=folder / "server.log")
    try:
        live_server.wait_ready(server, process, ["tenant:acme", "tenant:globex"])
        yield server
    finally:
        live_server.stop(process)
        if scratch is not None:
            scratch.drop()
