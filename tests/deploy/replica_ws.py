"""A minimal blocking WebSocket client (RFC 6455) for the replica tests: text frames, ping, close.

The chat socket is driven the way a browser drives it, over a real TCP connection through nginx,
without adding a WebSocket package to the project for tests alone.

    with WsClient.connect("ws://127.0.0.1:8080/ws/chat/3/", cookie="sessionid=...", origin=...) as ws:
        ws.send_json({"type": "user_message", "content": "Hi"})
        frame = ws.recv_json(timeout=30)      # raises WsClosed when the server (or its death) ends it
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import struct
from urllib.parse import urlparse

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class WsClosed(ConnectionError):
    """The socket ended: `code` is the close code the server sent, or None when the connection just dropped."""

    def __init__(self, code: int | None):
        super().__init__(f"websocket closed (code {code})")
        self.code = code


class WsClient:
    def __init__(self, sock: socket.socket, response_headers: dict[str, str]):
        self.sock = sock
        self.response_headers = response_headers
        self._buffer = b""

    @classmethod
    def connect(cls, url: str, *, cookie: str = "", origin: str = "", timeout: float = 10.0) -> WsClient:
        parsed = urlparse(url)
        sock = socket.create_connection((parsed.hostname, parsed.port or 80), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {parsed.path or '/'}{'?' + parsed.query if parsed.query else ''} HTTP/1.1",
                 f"Host: {parsed.netloc}", "Upgrade: websocket", "Connection: Upgrade",
                 f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
        lines += [f"Origin: {origin}"] if origin else []
        lines += [f"Cookie: {cookie}"] if cookie else []
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        client = cls(sock, {})
        status, headers = client._read_handshake()
        expected = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
        if not status.startswith("HTTP/1.1 101") or headers.get("sec-websocket-accept") != expected:
            sock.close()
            raise ConnectionError(f"websocket handshake refused: {status}")
        client.response_headers = headers
        return client

    def _read_handshake(self) -> tuple[str, dict[str, str]]:
        while b"\r\n\r\n" not in self._buffer:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("connection closed during the websocket handshake")
            self._buffer += chunk
        head, self._buffer = self._buffer.split(b"\r\n\r\n", 1)
        status, *header_lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    # -- frames ---------------------------------------------------------------------------------------
    def _send_frame(self, opcode: int, payload: bytes) -> None:
        head = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)  # client frames are always masked
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _read_exactly(self, n: int) -> bytes:
        while len(self._buffer) < n:
            try:
                chunk = self.sock.recv(65536)
            except OSError:  # reset by a dying server
                chunk = b""
            if not chunk:
                raise WsClosed(None)
            self._buffer += chunk
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data

    def _read_frame(self) -> tuple[int, bool, bytes]:
        first, second = self._read_exactly(2)
        n = second & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read_exactly(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read_exactly(8))[0]
        mask = self._read_exactly(4) if second & 0x80 else None
        payload = self._read_exactly(n)
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return first & 0x0F, bool(first & 0x80), payload

    def recv_text(self, timeout: float = 30.0) -> str:
        """The next text message (pings answered, fragments joined). Raises WsClosed, or TimeoutError."""
        self.sock.settimeout(timeout)
        parts: list[bytes] = []
        while True:
            try:
                opcode, fin, payload = self._read_frame()
            except socket.timeout:
                raise TimeoutError(f"no websocket message within {timeout} s") from None
            if opcode == OP_PING:
                self._send_frame(OP_PONG, payload)
            elif opcode == OP_CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                raise WsClosed(code)
            elif opcode in (OP_TEXT, OP_CONT):
                parts.append(payload)
                if fin:
                    return b"".join(parts).decode()

    def send_json(self, frame: dict) -> None:
        self._send_frame(OP_TEXT, json.dumps(frame).encode())

    def recv_json(self, timeout: float = 30.0) -> dict:
        return json.loads(self.recv_text(timeout))

    def close(self) -> None:
        try:
            self._send_frame(OP_CLOSE, struct.pack("!H", 1000))
        except OSError:
            pass
        self.sock.close()

    def __enter__(self) -> WsClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
