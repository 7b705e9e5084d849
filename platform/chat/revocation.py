"""Telling open chat sockets that their user's access changed, on every replica (the channel layer).

Each chat socket joins two groups: its user's (user_group) and its conversation's tenant's
(tenant_group). A change that may end access is announced to one of them once it commits
(chat.signals sends these):

    {"type": "access.changed", "reason": "logout", "session": "<sha256 of the session key>"}
        a logout: the sockets of that session close at once (the session row is not deleted yet
        when Django's user_logged_out fires, so they cannot find out by asking)
    {"type": "access.changed", "reason": "deactivated" | "password" | "membership" | "tenant" | ...}
        every socket of the user (or tenant) checks afresh (chat.access.verify_socket) and closes,
        with an error frame first, when it may no longer chat

The message names no secret: the session key travels hashed. An announcement lost while Redis was
unreachable leaves a socket open, but not useful: every turn runs the same check before it starts.
With the in-memory layer (no REDIS_URL) only sockets of this process hear it, which is every socket
of a one-process server; a management command's changes then reach sockets at their next turn.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from tenants.pin_events import installation_id

logger = logging.getLogger(__name__)

MESSAGE_TYPE = "access.changed"  # ChatConsumer.access_changed
SEND_TIMEOUT_S = 3.0  # an administrator's save must not hang on an unreachable Redis


def user_group(user_id: int) -> str:
    """The group of every chat socket of one user (in this installation: see pin_events.installation_id)."""
    return f"pagoda.chat.{installation_id()}.user.{int(user_id)}"


def tenant_group(tenant_id: int) -> str:
    """The group of every chat socket open on a conversation of one tenant."""
    return f"pagoda.chat.{installation_id()}.tenant.{int(tenant_id)}"


def session_digest(session_key: str | None) -> str:
    """What a logout announcement and a socket compare: never the session key itself."""
    return hashlib.sha256((session_key or "").encode()).hexdigest()


def user_access_changed(user_id: int, reason: str, *, session_key: str | None = None) -> bool:
    """Announce to the user's sockets; with `session_key`, that session ended (they close unasked)."""
    message = {"type": MESSAGE_TYPE, "reason": reason}
    if session_key:
        message["session"] = session_digest(session_key)
    return _send([(user_group(user_id), message)])


def tenant_access_changed(tenant_id: int, reason: str) -> bool:
    """Announce to every socket open on one of the tenant's conversations."""
    return _send([(tenant_group(tenant_id), {"type": MESSAGE_TYPE, "reason": reason})])


def _send(messages: list[tuple[str, dict]]) -> bool:
    """group_send each message; False (logged, never raised) when there is no layer or it failed: the
    change itself is saved, and the per-turn check still enforces it."""
    layer = get_channel_layer()
    if layer is None:
        return False

    async def send() -> None:
        for group, message in messages:
            await asyncio.wait_for(layer.group_send(group, message), SEND_TIMEOUT_S)

    try:
        async_to_sync(send)()
    except Exception:
        logger.warning("could not tell the chat sockets of %s", [g for g, _ in messages], exc_info=True)
        return False
    return True
