"""Other tabs of a conversation follow the reply one tab is writing (the channel layer).

Every chat socket joins its conversation's group. The socket whose turn runs sends its own frames to
its page as always, and the same frames to the group, marked "followed" (protocol.followed); every
other socket of the group passes them on to its page, which shows the user message and the reply as
they stream. A stop sent from a following tab is passed to the group too, and the socket writing
the reply stops it. With the in-memory layer (no REDIS_URL) only sockets of one process hear each
other; with channels-redis, sockets on every process and replica do.

    {"type": "chat.follow", "origin": "<channel name>", "frame": "<the frame's JSON text>"}
    {"type": "chat.stop", "origin": "<channel name>"}
"""
from __future__ import annotations

import asyncio
import logging

from tenants.pin_events import installation_id

logger = logging.getLogger(__name__)

FOLLOW = "chat.follow"  # ChatConsumer.chat_follow
STOP = "chat.stop"  # ChatConsumer.chat_stop
SEND_TIMEOUT_S = 2.0  # a reply must not wait on an unreachable Redis


def conversation_group(conversation_id: int) -> str:
    """The group of every chat socket open on one conversation."""
    return f"pagoda.chat.{installation_id()}.conversation.{int(conversation_id)}"


class Followers:
    """The other sockets of one conversation, as one turn tells them its frames. A send that fails
    (Redis away) turns the telling off for the rest of the turn: the reply itself goes on."""

    def __init__(self, layer, conversation_id: int, origin: str):
        self.layer = layer
        self.group = conversation_group(conversation_id)
        self.origin = origin
        self.broken = layer is None

    async def tell(self, frame: str) -> None:
        await self._send({"type": FOLLOW, "origin": self.origin, "frame": frame})

    async def stop(self) -> None:
        await self._send({"type": STOP, "origin": self.origin})

    async def _send(self, message: dict) -> None:
        if self.broken:
            return
        try:
            await asyncio.wait_for(self.layer.group_send(self.group, message), SEND_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - the following tabs get the reply when they reload
            logger.warning("could not tell the other tabs of %s", self.group, exc_info=True)
            self.broken = True
