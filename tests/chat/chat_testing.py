"""Helpers for the chat tests: sockets on the real ASGI stack, frame collection, engine set-aside."""
from __future__ import annotations

import asyncio
import contextlib
import json

from channels.testing import WebsocketCommunicator

from pagoda.db import db_call as db  # test tasks must not keep connections open past teardown
from runtime_testing import runtime_set_aside  # noqa: F401 (re-exported for the chat tests)

FRAME_TIMEOUT_S = 120  # a reply on two shared CPU cores; the tests ask for few tokens


def asgi_application():
    """pagoda.asgi's application (origin validation + session auth + the collected routes), imported
    while PAGODA_ENGINE is off so importing it starts no engine."""
    from pagoda.asgi import application

    return application


@contextlib.asynccontextmanager
async def chat_socket(conversation_id: int, session_key: str | None = None, *, origin: str | None = "http://localhost",
                      host: str = "localhost"):
    """A WebsocketCommunicator on /ws/chat/<id>/, connected; always disconnected on the way out.
    origin=None sends no Origin header. Yields (communicator, connected).
    """
    headers = [(b"host", host.encode())] + ([(b"origin", origin.encode())] if origin is not None else [])
    if session_key:
        headers.append((b"cookie", f"sessionid={session_key}".encode()))
    communicator = WebsocketCommunicator(asgi_application(), f"/ws/chat/{conversation_id}/", headers=headers)
    connected, _ = await communicator.connect(timeout=10)
    try:
        yield communicator, connected
    finally:
        await communicator.disconnect(timeout=10)


async def send(communicator, frame: dict | str) -> None:
    await communicator.send_to(text_data=frame if isinstance(frame, str) else json.dumps(frame))


async def next_frame(communicator, timeout: float = FRAME_TIMEOUT_S) -> dict:
    return json.loads(await communicator.receive_from(timeout=timeout))


async def frames_until_end(communicator, timeout: float = FRAME_TIMEOUT_S, end=("done", "error")) -> list[dict]:
    """Frames up to and including the first frame whose type is in `end`."""
    frames = []
    while True:
        frame = await next_frame(communicator, timeout)
        frames.append(frame)
        if frame["type"] in end:
            return frames


async def first_delta(communicator) -> list[dict]:
    """Frames up to and including the first delta (start first)."""
    frames = []
    while not frames or frames[-1]["type"] != "delta":
        frames.append(await next_frame(communicator))
        assert frames[-1]["type"] in ("start", "delta"), frames
    return frames


def texts(frames: list[dict]) -> str:
    return "".join(f["text"] for f in frames if f["type"] == "delta")


async def wait_for(predicate, timeout: float = 10.0) -> bool:
    """Poll a sync predicate (run off the event loop, so it may use the ORM) until it holds."""
    check = db(predicate)
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        if await check():
            return True
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)


