"""One reply at a time per conversation, across tabs, processes and replicas: a lease on the
conversation's row.

A turn takes the lease before it does anything (ReplyLock.acquire: one conditional UPDATE, so two
tabs racing for it cannot both win, on SQLite or PostgreSQL), renews it while the reply runs, and
gives it back when the reply is saved. A turn whose process died cannot give it back: its lease
expires PAGODA_CHAT_REPLY_LOCK_SECONDS after the last renewal, and the conversation is free again.
No conversation stays locked for longer than that.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from django.db.models import Q
from django.utils import timezone

from chat.models import Conversation
from pagoda.db import db_call

logger = logging.getLogger(__name__)
T = TypeVar("T")


def acquire(conversation_id: int, owner: str, ttl_s: float) -> bool:
    """Take (or renew, for the same owner) the conversation's lease for `ttl_s` seconds; False when
    another owner holds one that has not expired."""
    now = timezone.now()
    free = Q(reply_lock_expires_at__isnull=True) | Q(reply_lock_expires_at__lt=now) | Q(reply_lock_owner=owner)
    return Conversation.objects.filter(free, pk=conversation_id).update(
        reply_lock_owner=owner, reply_lock_expires_at=now + timedelta(seconds=ttl_s)) == 1


def release(conversation_id: int, owner: str) -> bool:
    """Give the lease back if `owner` still holds it (an expired one may have been taken since)."""
    return Conversation.objects.filter(pk=conversation_id, reply_lock_owner=owner).update(
        reply_lock_owner="", reply_lock_expires_at=None) == 1


def holder(conversation_id: int) -> str | None:
    """The owner of the conversation's unexpired lease, or None."""
    row = Conversation.objects.filter(pk=conversation_id).values("reply_lock_owner", "reply_lock_expires_at").first()
    if row is None or row["reply_lock_expires_at"] is None or row["reply_lock_expires_at"] < timezone.now():
        return None
    return row["reply_lock_owner"] or None


class ReplyLock:
    """The lease of one turn: `await lock.acquire(...)`, then `await lock.release()` whatever happens.
    While held it is renewed every third of its time to live, from the event loop."""

    def __init__(self, conversation_id: int, ttl_s: float):
        self.conversation_id = conversation_id
        self.ttl_s = ttl_s
        self.owner = uuid.uuid4().hex
        self._renewing: asyncio.Task | None = None

    async def acquire(self, then: Callable[[], T]) -> tuple[bool, T | None]:
        """Take the lease: (False, None) while another owner holds it. Else run then() under the lease in
        the same database call (one connection, one thread hop) and return (True, then()). If then()
        raises, the lease is given back and the exception propagates."""
        taken, value = await db_call(self._acquire_then)(then)
        if taken:
            self._renewing = asyncio.create_task(self._renew())
        return taken, value

    def _acquire_then(self, then: Callable[[], T]) -> tuple[bool, T | None]:
        if not acquire(self.conversation_id, self.owner, self.ttl_s):
            return False, None
        try:
            return True, then()
        except BaseException:
            try:
                release(self.conversation_id, self.owner)
            except Exception:  # noqa: BLE001 - the database away: the lease expires by itself
                logger.warning("could not release the reply lock of conversation %s", self.conversation_id,
                               exc_info=True)
            raise

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.ttl_s / 3)
            try:
                if not await db_call(acquire)(self.conversation_id, self.owner, self.ttl_s):
                    logger.warning("the reply lock of conversation %s was taken over", self.conversation_id)
                    return
            except Exception:  # noqa: BLE001 - the database away for a moment: try again next time
                logger.warning("could not renew the reply lock of conversation %s", self.conversation_id,
                               exc_info=True)

    async def release(self) -> None:
        if self._renewing is None:
            return
        self._renewing.cancel()
        self._renewing = None
        try:
            await db_call(release)(self.conversation_id, self.owner)
        except Exception:  # noqa: BLE001 - it expires by itself
            logger.warning("could not release the reply lock of conversation %s", self.conversation_id,
                           exc_info=True)
