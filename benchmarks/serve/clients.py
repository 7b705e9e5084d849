"""One streamed request per call, timed on the client: /v1/completions and /v1/chat/completions (SSE,
through aiohttp when installed, else httpx) and the chat WebSocket (websockets).

A "chunk" is what the client receives that carries generated text: an SSE event with text or a delta
frame. TTFT is send -> first chunk, ITL the gaps between chunks, end-to-end send -> end of stream;
token counts come from the server's usage (an SSE usage chunk, the done frame's usage).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RequestResult:
    ok: bool
    error: str = ""
    prompt_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    sent_at: float = 0.0
    ttft: float | None = None
    e2e: float | None = None
    chunk_times: list[float] = field(default_factory=list)  # arrival of each text chunk (perf_counter)

    @property
    def itls(self) -> list[float]:
        return [b - a for a, b in zip(self.chunk_times, self.chunk_times[1:])]

    @property
    def tpot(self) -> float | None:
        """Seconds per output token after the first (end-to-end minus TTFT, over the rest)."""
        if self.ttft is None or self.e2e is None or self.output_tokens < 2:
            return None
        return (self.e2e - self.ttft) / (self.output_tokens - 1)


def http_backend() -> str:
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return "httpx"
    return "aiohttp"


class HttpSession:
    """One connection pool for every request of a run (aiohttp or httpx: the same interface here)."""

    def __init__(self, base_url: str, limit: int, backend: str | None = None):
        self.base_url = base_url.rstrip("/")
        self.backend = backend or http_backend()
        self.limit = max(1, limit)
        self._session: Any = None

    async def __aenter__(self) -> "HttpSession":
        if self.backend == "aiohttp":
            import aiohttp

            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.limit + 8),
                timeout=aiohttp.ClientTimeout(total=None, sock_read=600))
        else:
            import httpx

            limits = httpx.Limits(max_connections=self.limit + 8, max_keepalive_connections=self.limit + 8)
            self._session = httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=60.0), limits=limits)
        return self

    async def __aexit__(self, *exc) -> None:
        if self.backend == "aiohttp":
            await self._session.close()
        else:
            await self._session.aclose()

    async def sse(self, path: str, body: dict, api_key: str):
        """(status, error body or None, async iterator of (arrival time, event data))."""
        url, headers = f"{self.base_url}{path}", {"Authorization": f"Bearer {api_key}"}
        if self.backend == "aiohttp":
            async with self._session.post(url, json=body, headers=headers) as resp:
                if resp.status != 200:
                    yield resp.status, (await resp.text())[:500], None
                    return
                buffer = b""
                async for part in resp.content.iter_any():
                    now = time.perf_counter()
                    buffer += part
                    while b"\n\n" in buffer:
                        event, buffer = buffer.split(b"\n\n", 1)
                        for line in event.split(b"\n"):
                            if line.startswith(b"data: "):
                                yield 200, None, (now, line[6:].decode())
        else:
            async with self._session.stream("POST", url, json=body, headers=headers) as resp:
                if resp.status_code != 200:
                    yield resp.status_code, (await resp.aread()).decode(errors="replace")[:500], None
                    return
                async for line in resp.aiter_lines():
                    if line.startswith("data: "):
                        yield 200, None, (time.perf_counter(), line[6:])


def _take_usage(result: RequestResult, usage: dict) -> None:
    result.prompt_tokens = usage.get("prompt_tokens", 0)
    result.output_tokens = usage.get("completion_tokens", 0)
    result.cached_tokens = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)


async def stream_api(session: HttpSession, endpoint: str, payload: Any, api_key: str, model: str,
                     output_len: int, result: RequestResult | None = None) -> RequestResult:
    """One streamed call. endpoint "completions": payload is token ids; "chat": a list of messages.
    `result`: filled as the stream goes (a caller may watch its chunk_times), and returned."""
    body: dict = {"model": model, "stream": True, "stream_options": {"include_usage": True},
                  "temperature": 0, "ignore_eos": True}
    if endpoint == "completions":
        body.update(prompt=payload, max_tokens=output_len)
        path = "/v1/completions"
    else:
        body.update(messages=payload, max_completion_tokens=output_len)
        path = "/v1/chat/completions"
    result = result or RequestResult(ok=False)
    result.sent_at = time.perf_counter()
    done = False
    try:
        async with contextlib.aclosing(session.sse(path, body, api_key)) as events:
            async for status, error, event in events:
                if error is not None:
                    result.error = f"HTTP {status}: {error}"
                    return result
                now, data = event
                if data == "[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    result.error = f"stream error: {chunk['error'].get('message', chunk['error'])}"
                    return result
                if chunk.get("usage"):
                    _take_usage(result, chunk["usage"])
                for choice in chunk.get("choices") or []:
                    text = choice.get("text") if endpoint == "completions" else (choice.get("delta") or {}).get("content")
                    if text:
                        result.chunk_times.append(now)
        end = time.perf_counter()
    except Exception as exc:  # noqa: BLE001 - a failed request is counted, not fatal to the run
        result.error = f"{type(exc).__name__}: {exc}"[:500]
        return result
    return _finish(result, end, done, "no [DONE] at the end of the stream")


def _finish(result: RequestResult, end: float, done: bool, missing: str) -> RequestResult:
    if not done:
        result.error = missing
        return result
    if not result.chunk_times:
        result.error = "the stream carried no text"
        return result
    result.ttft = result.chunk_times[0] - result.sent_at
    result.e2e = end - result.sent_at
    result.ok = True
    return result


# --- the chat WebSocket ----------------------------------------------------------------------------
class ChatLogin:
    """A logged-in browser of the chat: session cookie, and fresh conversations made as the page makes
    them (POST /chat/new/), each used for one turn (a conversation's history would grow the prompt)."""

    def __init__(self, base_url: str, username: str, password: str, tenant: str | None = None):
        import httpx

        self.base_url, self.tenant = base_url.rstrip("/"), tenant
        self.client = httpx.Client(base_url=self.base_url, timeout=60, follow_redirects=False)
        self.client.get("/accounts/login/")
        response = self.client.post("/accounts/login/", data={"username": username, "password": password},
                                    headers=self._csrf())
        if response.status_code != 302 or "sessionid" not in self.client.cookies:
            raise RuntimeError(f"chat login as {username!r} failed (HTTP {response.status_code})")
        self.session = self.client.cookies["sessionid"]

    def _csrf(self) -> dict:
        return {"X-CSRFToken": self.client.cookies.get("csrftoken", ""), "Origin": self.base_url}

    def new_conversation(self) -> int:
        response = self.client.post("/chat/new/", data={"tenant": self.tenant or ""}, headers=self._csrf())
        location = response.headers.get("location", "")
        try:
            return int(location.rstrip("/").rsplit("/", 1)[-1])
        except ValueError:
            raise RuntimeError(f"POST /chat/new/ gave HTTP {response.status_code} {location!r}") from None

    def close(self) -> None:
        self.client.close()


async def chat_turn(base_url: str, session: str, conversation_id: int, content: str, profile: str | None,
                    timeout: float = 600, started: asyncio.Event | None = None) -> RequestResult:
    """Open the conversation's socket as the browser does, send one message, read up to done / error.
    `started` is set when the start frame came (the turn is saved) or the turn ended."""
    from websockets.asyncio.client import connect

    ws_url = base_url.replace("http", "ws", 1).rstrip("/") + f"/ws/chat/{conversation_id}/"
    headers = {"Origin": base_url.rstrip("/"), "Cookie": f"sessionid={session}"}
    result = RequestResult(ok=False)
    frame = {"type": "user_message", "content": content, **({"profile": profile} if profile else {})}
    try:
        async with connect(ws_url, additional_headers=headers, max_size=None, open_timeout=60,
                           ping_interval=None, close_timeout=5) as ws:
            result.sent_at = time.perf_counter()
            await ws.send(json.dumps(frame))
            while True:
                got = json.loads(await asyncio.wait_for(ws.recv(), timeout))
                now = time.perf_counter()
                if got["type"] == "start" and started is not None:
                    started.set()
                if got["type"] == "delta" and got.get("text"):
                    result.chunk_times.append(now)
                elif got["type"] == "error":
                    result.error = f"error frame {got.get('code')}: {got.get('message')}"[:500]
                    return result
                elif got["type"] == "done":
                    usage = got.get("usage") or {}
                    result.prompt_tokens = usage.get("prompt_tokens", 0)
                    result.output_tokens = usage.get("completion_tokens", 0)
                    result.cached_tokens = usage.get("cached_tokens", 0)
                    return _finish(result, now, True, "")
    except Exception as exc:  # noqa: BLE001
        result.error = f"{type(exc).__name__}: {exc}"[:500]
        return result
    finally:
        if started is not None:
            started.set()
