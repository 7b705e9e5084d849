"""/v1 calls against a live server with httpx (async), and what a streamed answer looked like."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import httpx


def auth(server, key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.key(key)}"}


def client(num_connections: int) -> httpx.AsyncClient:
    """No keep-alive: a connection closed mid-stream is a client gone, not one parked in a pool."""
    return httpx.AsyncClient(limits=httpx.Limits(max_connections=num_connections, max_keepalive_connections=0))


async def post(http: httpx.AsyncClient, server, path: str, body: dict, key: str, timeout: float = 300):
    """(status, JSON body, headers, seconds)"""
    started = time.monotonic()
    response = await http.post(f"{server.url}/v1/{path}", json=body, headers=auth(server, key), timeout=timeout)
    return response.status_code, response.json(), response.headers, time.monotonic() - started


@dataclass
class Stream:
    status: int = 0
    events: list = field(default_factory=list)  # parsed chunks, "[DONE]" as the string
    sent_at: float = 0.0
    first_content_at: float | None = None
    error: dict | None = None

    @property
    def ttft(self) -> float | None:
        return None if self.first_content_at is None else self.first_content_at - self.sent_at

    @property
    def id(self) -> str | None:
        return next((e["id"] for e in self.events if isinstance(e, dict) and "id" in e), None)


def _content(event: dict) -> str:
    choices = event.get("choices") or []
    if not choices:
        return ""
    return (choices[0].get("delta") or {}).get("content") or choices[0].get("text") or ""


async def stream(http: httpx.AsyncClient, server, path: str, body: dict, key: str, *, timeout: float = 300,
                 leave_after_first_content: bool = False) -> Stream:
    """POST with stream=true and read the events (or leave after the first one with content)."""
    out = Stream(sent_at=time.monotonic())
    async with http.stream("POST", f"{server.url}/v1/{path}", json={**body, "stream": True},
                           headers=auth(server, key), timeout=timeout) as response:
        out.status = response.status_code
        if response.status_code != 200:
            out.error = json.loads(await response.aread())
            return out
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            payload = line.removeprefix("data: ")
            event = payload if payload == "[DONE]" else json.loads(payload)
            out.events.append(event)
            if isinstance(event, dict) and _content(event) and out.first_content_at is None:
                out.first_content_at = time.monotonic()
                if leave_after_first_content:
                    return out  # the `async with` closes the connection mid-answer
    return out


def text_of(s: Stream) -> str:
    return "".join(_content(e) for e in s.events if isinstance(e, dict))
