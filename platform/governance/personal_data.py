"""An employee's own data: every conversation they have (any tenant) as JSON, and erasing them all.

Only the requesting user's rows are ever read or deleted. Their usage stays in the ledger (it is the
tenant's accounting, not the conversations' content).
"""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from tenants import audit
from chat.models import Conversation, Message


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


def _message(m: Message) -> dict:
    # parent_id: the message this one follows (edits and regenerated replies are its siblings: chat.branches);
    # feedback: the owner's thumbs on a reply (only a conversation's owner can rate its replies)
    feedback = [{"rating": "up" if f.rating > 0 else "down", "comment": f.comment} for f in m.feedback.all()]
    return {"id": m.pk, "parent_id": m.parent_id, "role": m.role, "content": m.content, "status": m.status,
            "created_at": _iso(m.created_at), "profile": m.profile.name if m.profile else None,
            "prompt_tokens": m.num_prompt_tokens, "output_tokens": m.num_output_tokens,
            "attachments": [{"name": a.name, "kind": a.kind, "size_bytes": a.size_bytes, "num_tokens": a.num_tokens,
                             "text": a.text} for a in m.attachments.all()],
            **({"feedback": feedback[0]} if feedback else {})}


def _conversation(c: Conversation) -> dict:
    return {"id": c.pk, "tenant": c.tenant.slug, "title": c.title, "created_at": _iso(c.created_at),
            "updated_at": _iso(c.updated_at),
            "messages": [_message(m) for m in sorted(c.messages.all(), key=lambda m: (m.created_at, m.pk))]}


def export_user(user, conversation_id: int | None = None) -> dict | None:
    """{"user", "exported_at", "conversations": [...]} of all the user's conversations, or of the one
    `conversation_id`; None when that one is not theirs (or does not exist)."""
    conversations = (Conversation.objects.filter(user=user).select_related("tenant")
                     .prefetch_related("messages__profile", "messages__feedback", "messages__attachments")
                     .order_by("created_at", "id"))
    if conversation_id is not None:
        conversations = conversations.filter(pk=conversation_id)
        if not conversations.exists():
            return None
    return {"user": user.get_username(), "exported_at": timezone.now().isoformat(),
            "conversations": [_conversation(c) for c in conversations]}


def count_conversations(user) -> int:
    return Conversation.objects.filter(user=user).count()


@transaction.atomic
def delete_all_conversations(user) -> int:
    """Delete every conversation of `user` (their messages go with them); audited; returns how many."""
    conversations = Conversation.objects.filter(user=user)
    per_tenant: dict = {}
    for c in conversations.select_related("tenant"):
        per_tenant.setdefault(c.tenant, 0)
        per_tenant[c.tenant] += 1
    conversations.delete()
    for tenant, count in per_tenant.items():
        audit.record("conversation.delete_all", actor=user, tenant=tenant, after={"deleted_conversations": count})
    return sum(per_tenant.values())
