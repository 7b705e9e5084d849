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
import json
import logging

from chat import protocol
from tenants.pin_events import installation_id

logger = logging.getLogger(__name__)

FOLLOW = "chat.follow"  # ChatConsumer.chat_follow
STOP = "chat.stop"  # ChatConsumer.chat_stop
CATCHUP = "chat.catchup"  # ChatConsumer.chat_catchup
SNAPSHOT = "chat.snapshot"  # ChatConsumer.chat_snapshot
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
        self.start: str | None = None  # the followed start frame, while the reply streams
        self.message_id: int | None = None
        self.parts: list[str] = []  # the text of every delta told so far
        self.seq = 0  # how many deltas were told

    async def tell(self, frame: str) -> None:
        await self._send({"type": FOLLOW, "origin": self.origin, "frame": frame})

    async def tell_start(self, followed_start: str, message_id: int) -> None:
        self.start, self.message_id = followed_start, message_id
        await self.tell(followed_start)

    async def tell_delta(self, frame: str, text: str) -> None:
        # Counted before the send: a snapshot taken while it is under way covers it, and the joining
        # socket drops the delta itself by its seq.
        self.parts.append(text)
        self.seq += 1
        await self.tell(protocol.followed(frame, message_id=self.message_id, seq=self.seq))

    async def tell_end(self, followed_end: str) -> None:
        self.start = None  # nothing left to catch up on: the end carries the whole text
        await self.tell(followed_end)

    def snapshot(self) -> str | None:
        """The reply so far as a snapshot frame, or None when no reply streams."""
        if self.start is None:
            return None
        return protocol.snapshot_frame(self.start, "".join(self.parts), self.seq)

    async def answer(self, channel: str) -> None:
        """Send the snapshot to the socket that asked for it (chat.catchup), if a reply streams."""
        snapshot = self.snapshot()
        if snapshot is None or self.layer is None:
            return
        try:
            await asyncio.wait_for(self.layer.send(channel, {"type": SNAPSHOT, "frame": snapshot}), SEND_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - that tab shows the reply when it ends
            logger.warning("could not send the reply so far to a tab of %s", self.group, exc_info=True)

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


async def ask(layer, conversation_id: int, origin: str) -> bool:
    """Ask the conversation's group for the reply being written (answered by Followers.answer)."""
    try:
        await asyncio.wait_for(layer.group_send(conversation_group(conversation_id), {"type": CATCHUP, "origin": origin}),
                               SEND_TIMEOUT_S)
        return True
    except Exception:  # noqa: BLE001 - this tab shows the reply when it ends
        logger.warning("could not ask for the reply of conversation %s", conversation_id, exc_info=True)
        return False


class CatchingUp:
    """What a socket that joined mid-reply passes on to its page, in order, none lost or doubled. A
    socket catches up from joining its group until it knows whether a reply runs (give_up when none).

    Until the snapshot comes, the reply's deltas are held; the snapshot is passed on with the held
    deltas it does not cover, and after it only deltas numbered past it. A start or an end that comes
    first means there is nothing to catch up on (a reply that began after the join, or one whose end
    carries its whole text): what was held is passed on and the socket follows as any other.
    """

    def __init__(self):
        self.waiting = True
        self.held: list[str] = []
        self.message_id: int | None = None
        self.seq = 0
        self.finished = False  # the caught-up reply ended: nothing more to filter

    def on_snapshot(self, frame: str) -> list[str]:
        if not self.waiting:
            return []  # late: the reply was followed from its start, or it ended
        snapshot = json.loads(frame)
        self.waiting = False
        self.message_id, self.seq = snapshot["message_id"], snapshot["seq"]
        held, self.held = self.held, []
        return [frame] + [f for f in held if self._passes(json.loads(f))]

    def on_follow(self, frame: str) -> list[str]:
        data = json.loads(frame)
        if self.waiting:
            if data.get("type") == "delta":
                self.held.append(frame)
                return []
            self.waiting = False
            self.finished = True
            held, self.held = self.held, []
            return held + [frame]
        if not self._passes(data):
            return []
        if data.get("type") in ("done", "error") and data.get("message_id") == self.message_id:
            self.finished = True
        return [frame]

    def give_up(self) -> list[str]:
        """No reply to catch up on after all: what was held, to pass on; the socket then follows as any other."""
        self.waiting = False
        self.finished = True
        held, self.held = self.held, []
        return held

    def _passes(self, data: dict) -> bool:
        """False for what of the caught-up reply the page has had: its start (the snapshot begins with it,
        and the start's own frame can come after the snapshot) and the deltas up to the snapshot's."""
        if data.get("message_id") != self.message_id or data.get("type") not in ("start", "delta"):
            return True
        if data["type"] == "start":
            return False
        seq = data.get("seq", 0)
        if seq <= self.seq:
            return False
        self.seq = seq
        return True
