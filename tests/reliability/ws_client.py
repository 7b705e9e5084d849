"""Chat WebSocket clients against a live server: a browser-like socket (session cookie + Origin), one
chat turn with its frames and timings, and a raw-frame socket for payloads a library refuses to send
(invalid UTF-8 in a text frame)."""
from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import struct
import time
from dataclasses import dataclass, field
from urllib.parse import urlparse

from websockets.asyncio.client import connect


def socket_headers(session: str | None, origin: str) -> dict[str, str]:
    headers = {"Origin": origin}
    if session:
        headers["Cookie"] = f"sessionid={session}"
    return headers


def open_chat(server, conversation_id: int, session: str | None, origin: str | None = None, **kwargs):
    """websockets' connect() to /ws/chat/<id>/ as the browser of `session` would (same-origin by default)."""
    return connect(f"{server.ws_base}/ws/chat/{conversation_id}/",
                   additional_headers=socket_headers(session, origin or server.url),
                   max_size=None, open_timeout=60, close_timeout=10, ping_interval=None, **kwargs)


@dataclass
class Turn:
    """What one chat turn looked like from the client."""

    frames: list[dict] = field(default_factory=list)
    sent_at: float = 0.0
    first_delta_at: float | None = None
    ended_at: float | None = None

    @property
    def end(self) -> dict | None:
        return self.frames[-1] if self.frames and self.frames[-1]["type"] in ("done", "error") else None

    @property
    def text(self) -> str:
        return "".join(f["text"] for f in self.frames if f["type"] == "delta")

    @property
    def ttft(self) -> float | None:
        return None if self.first_delta_at is None else self.first_delta_at - self.sent_at

    def count(self, kind: str) -> int:
        return sum(1 for f in self.frames if f["type"] == kind)


async def next_frame(ws, timeout: float) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def run_turn(ws, content: str, *, profile: str | None = None, timeout: float = 300,
                   stop_after_first_delta: bool = False) -> Turn:
    """Send a user message and read frames up to done / error (or, with stop_after_first_delta, return
    right after the first delta: the caller then drops the socket mid-reply)."""
    frame = {"type": "user_message", "content": content}
    if profile:
        frame["profile"] = profile
    turn = Turn(sent_at=time.monotonic())
    await ws.send(json.dumps(frame))
    deadline = turn.sent_at + timeout
    while True:
        got = await next_frame(ws, max(0.1, deadline - time.monotonic()))
        turn.frames.append(got)
        if got["type"] == "delta" and turn.first_delta_at is None:
            turn.first_delta_at = time.monotonic()
            if stop_after_first_delta:
                return turn
        if got["type"] in ("done", "error"):
            turn.ended_at = time.monotonic()
            return turn


class RawSocket:
    """A WebSocket over a plain TCP socket, sending frames byte for byte (client frames are masked)."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float = 30):
        parsed = urlparse(url)
        self.sock = socket.create_connection((parsed.hostname, parsed.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {parsed.path} HTTP/1.1", f"Host: {parsed.hostname}:{parsed.port}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13",
                 *(f"{k}: {v}" for k, v in headers.items())]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = self.sock.recv(4096)
            if not chunk:
                break
            response += chunk
        self.status_line = response.split(b"\r\n", 1)[0].decode(errors="replace")
        self.buffer = response.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in response else b""

    def send_frame(self, payload: bytes, opcode: int = 0x1) -> None:
        mask = os.urandom(4)
        header = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 2**16:
            header += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def recv_frame(self) -> tuple[int, bytes]:
        """(opcode, payload) of the next server frame (servers do not mask)."""
        first, second = self._read(2)
        n = second & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        return first & 0x0F, self._read(n)

    def close(self) -> None:
        self.sock.close()
