"""Request header sizes: an oversized header gets a JSON 431, never a dropped connection.

daphne's HTTP server (twisted) drops the connection without a word when one header line passes
16 KiB, and answers a bare 400 when all headers together do. `raise_server_limits()` lifts those
limits to SERVER_MAX_HEADER_BYTES, so that `HeaderLimitMiddleware` sees the request and answers
431 in OpenAI's error shape (a WebSocket handshake is refused instead); a line past even that
limit gets the same 431 from twisted itself.
"""
from __future__ import annotations

import json

MAX_HEADER_BYTES = 16 * 1024  # one header (name + value): a bearer key or a cookie is far below this
MAX_HEADERS_TOTAL_BYTES = 64 * 1024
SERVER_MAX_HEADER_BYTES = 1024 * 1024  # what the server reads before giving up on a request's headers


def _error_body(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": "request_header_too_large"}}).encode()


def oversized(headers: list[tuple[bytes, bytes]]) -> str | None:
    """Why these headers are refused, or None when they are within the limits."""
    total = 0
    for name, value in headers:
        size = len(name) + len(value)
        if size > MAX_HEADER_BYTES:
            return (f"The {name.decode('latin-1')} header is {size} bytes; "
                    f"a header may have at most {MAX_HEADER_BYTES}.")
        total += size
    if total > MAX_HEADERS_TOTAL_BYTES:
        return f"The request headers are {total} bytes; at most {MAX_HEADERS_TOTAL_BYTES} are accepted."
    return None


class HeaderLimitMiddleware:
    """ASGI: 431 with a JSON error for an HTTP request whose headers are too large; a WebSocket
    handshake with such headers is refused (403)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        reason = oversized(scope.get("headers", [])) if scope["type"] in ("http", "websocket") else None
        if reason is None:
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close"})
            return
        body = _error_body(reason)
        await send({"type": "http.response.start", "status": 431,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def _line_too_long(channel, line: bytes) -> None:
    body = _error_body(f"A request header line is over {SERVER_MAX_HEADER_BYTES} bytes.")
    channel.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\n"
                            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
    channel.loseConnection()


def raise_server_limits() -> None:
    """Let twisted read headers up to SERVER_MAX_HEADER_BYTES (it runs under daphne; a no-op elsewhere)."""
    try:
        from twisted.web import http
    except ImportError:
        return
    http.HTTPChannel.MAX_LENGTH = SERVER_MAX_HEADER_BYTES
    http.HTTPChannel.totalHeadersSize = SERVER_MAX_HEADER_BYTES
    http.HTTPChannel.lineLengthExceeded = _line_too_long
