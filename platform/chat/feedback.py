"""Writes of reply feedback: a thumbs up or down, with an optional comment, on one assistant reply.

    set_feedback(user, reply, rating="up" | "down" | "", comment="...")   # "" takes the feedback back

One row per user and reply (chat.models.Feedback), changed in place. Only replies that said something
can be rated: a reply still being written, or one that failed, is refused.
"""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from chat.models import Feedback, Message

RATINGS = {"up": Feedback.Rating.UP, "down": Feedback.Rating.DOWN}
RATEABLE = {Message.Status.COMPLETE, Message.Status.STOPPED}


def rating_name(value: int | None) -> str | None:
    """"up" / "down" for a stored rating, None for none."""
    return next((name for name, rating in RATINGS.items() if rating == value), None)


@transaction.atomic
def set_feedback(user, reply: Message, *, rating: str, comment: str = "") -> Feedback | None:
    """Store the user's rating of `reply` ("up" or "down") and comment, replacing any earlier one;
    rating "" removes it (returns None). ValidationError for an unknown rating, a comment over
    Feedback.MAX_COMMENT_CHARS or without a rating, or a reply that is not a finished assistant reply."""
    comment = str(comment).strip()
    if rating not in RATINGS and rating != "":
        raise ValidationError({"rating": 'rating must be "up", "down" or "" (none).'})
    if reply.role != Message.Role.ASSISTANT or reply.status not in RATEABLE:
        raise ValidationError({"rating": "Only a finished reply of the assistant can be rated."})
    if len(comment) > Feedback.MAX_COMMENT_CHARS:
        raise ValidationError({"comment": f"A comment holds at most {Feedback.MAX_COMMENT_CHARS:,} characters "
                                          f"(this one has {len(comment):,})."})
    if rating == "":
        if comment:
            raise ValidationError({"comment": "A comment needs a thumbs up or down."})
        Feedback.objects.filter(message=reply, user=user).delete()
        return None
    feedback, _ = Feedback.objects.update_or_create(message=reply, user=user,
                                                    defaults={"rating": RATINGS[rating], "comment": comment})
    return feedback
