"""How a tenant's replies fare, per system-prompt version and per sampling profile: the console's
"Reply quality" tables, so an admin can tell whether prompt v3 answers better than v2.

Every assistant reply records the prompt version and the profile that produced it (Message.system_prompt,
Message.profile), its length (num_output_tokens) and its time to first token. Replies that failed or
are still pending are left out; stopped ones count (people rate them too).

    by_prompt_version(tenant) -> [{"version": 3 | None, "num_replies", "num_up", "num_down", "num_rated",
                                   "up_rate": 0..1 | None, "mean_output_tokens", "mean_ttft_ms"}, ...]
    by_profile(tenant)        -> the same rows with "profile": name | None (a deleted profile)
"""
from __future__ import annotations

from django.db.models import Avg, Count, Q

from chat.models import Feedback, Message
from tenants.models import Tenant

_COUNTED = (Message.Status.COMPLETE, Message.Status.STOPPED)


def _replies(tenant: Tenant):
    return Message.objects.filter(conversation__tenant=tenant, role=Message.Role.ASSISTANT, status__in=_COUNTED)


def _rows(tenant: Tenant, group: str, name: str) -> list[dict]:
    # Two queries: joining the feedback into the replies' query would count a reply once per rating.
    replies = (_replies(tenant).values(group).order_by(group)
               .annotate(num_replies=Count("id"), mean_output_tokens=Avg("num_output_tokens"),
                         mean_ttft_ms=Avg("time_to_first_token_ms")))
    votes = (Feedback.objects.filter(message__in=_replies(tenant)).values(f"message__{group}")
             .order_by(f"message__{group}")
             .annotate(num_up=Count("id", filter=Q(rating=Feedback.Rating.UP)),
                       num_down=Count("id", filter=Q(rating=Feedback.Rating.DOWN))))
    votes_by_key = {row[f"message__{group}"]: row for row in votes}
    rows = []
    for row in replies:
        vote = votes_by_key.get(row[group], {})
        num_up, num_down = vote.get("num_up", 0), vote.get("num_down", 0)
        rated = num_up + num_down
        rows.append({
            name: row[group],
            "num_replies": row["num_replies"],
            "num_up": num_up,
            "num_down": num_down,
            "num_rated": rated,
            "up_rate": num_up / rated if rated else None,
            "mean_output_tokens": _rounded(row["mean_output_tokens"]),
            "mean_ttft_ms": _rounded(row["mean_ttft_ms"]),
        })
    return rows


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def by_prompt_version(tenant: Tenant) -> list[dict]:
    """One row per system-prompt version that produced a reply, newest version first; version None
    holds the replies made with no system prompt active (or a prompt row since deleted)."""
    rows = _rows(tenant, "system_prompt__version", "version")
    return sorted(rows, key=lambda r: (r["version"] is None, -(r["version"] or 0)))


def by_profile(tenant: Tenant) -> list[dict]:
    """One row per sampling profile that produced a reply, by name; profile None: a deleted profile."""
    rows = _rows(tenant, "profile__name", "profile")
    return sorted(rows, key=lambda r: (r["profile"] is None, r["profile"] or ""))
