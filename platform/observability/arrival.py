"""When a request reached the server: the start of what its user waits, for TTFT and latency.

`ArrivalStamp` wraps the HTTP application: each request's handling runs with its arrival time
(time.monotonic()) in a context variable, which the tasks and threads Django starts for it inherit.
A WebSocket consumer calls `stamp()` as a frame arrives, before it starts the task that answers it.
`request_arrival()` reads it (now, outside any request).
"""
import contextvars
import time

_arrival: contextvars.ContextVar[float | None] = contextvars.ContextVar("pagoda_arrival", default=None)


def stamp() -> float:
    """Mark now as the current request's arrival (for the context this runs in and tasks it starts)."""
    now = time.monotonic()
    _arrival.set(now)
    return now


def request_arrival() -> float:
    arrival = _arrival.get()
    return arrival if arrival is not None else time.monotonic()


class ArrivalStamp:
    """ASGI middleware: runs each HTTP request with its arrival time stamped."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            stamp()
        return await self.app(scope, receive, send)
