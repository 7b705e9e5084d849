"""A conversation as a tree of messages: editing a sent message forks it, regenerating a reply adds a
sibling, and nothing is ever deleted. Pure (no database): built from a conversation's rows.

Each message follows its parent (Message.parent): a reply follows the user message it answers, a user
message follows the message that was last on screen when it was sent (a reply, usually). Siblings are
the versions the page pages through with ‹ i / n ›: replies regenerated for one user message, or edits
of one user message (each edit starts a branch; the older branch stays, with its later turns).

The *current branch* is the path from the first message to the newest one: what the page shows first
and what a turn sent without saying where it goes continues. A turn may name another place (an older
branch the reader went back to); the prompt is always the path to that place.
"""
from __future__ import annotations

from collections.abc import Iterable

from chat.models import Message


class Tree:
    """The messages of one conversation (system rows left out), oldest first, with each one's parent."""

    def __init__(self, messages: Iterable[Message]):
        self.messages = [m for m in messages if m.role != Message.Role.SYSTEM]
        self.by_id = {m.pk: m for m in self.messages}
        # A parent outside the list (a system row) makes a first message.
        self.parent_ids = {m.pk: m.parent_id if m.parent_id in self.by_id else None for m in self.messages}

    def newest(self) -> Message | None:
        return self.messages[-1] if self.messages else None

    def path_to(self, message: Message | None) -> list[Message]:
        """The messages from the first one down to `message`, inclusive; [] for None."""
        path: list[Message] = []
        seen: set[int] = set()
        while message is not None and message.pk not in seen:  # seen: a hand-edited loop cannot hang us
            seen.add(message.pk)
            path.append(message)
            parent_id = self.parent_ids.get(message.pk)
            message = self.by_id.get(parent_id) if parent_id is not None else None
        return path[::-1]

    def current(self) -> list[Message]:
        """The current branch: the path to the newest message."""
        return self.path_to(self.newest())


def last_user_message(path: list[Message]) -> Message | None:
    return next((m for m in reversed(path) if m.role == Message.Role.USER), None)
