"""Reads of the chat flow: the visible thread of a conversation, the sidebar, and who may open what.

Regenerating a reply keeps the earlier one (its tokens stay in the tenant's usage) and adds a newer
assistant row after the same user message: the thread shows, and the prompt uses, only the newest
reply to each user message.
"""
from __future__ import annotations

from datetime import date, datetime

from django.db.models import Count, QuerySet

from chat.attachments import prompt_content
from chat.errors import CLOSE_FORBIDDEN, CLOSE_NOT_FOUND, ChatAccessError
from chat.models import Attachment, Conversation, Message
from pagoda import daily
from tenants.models import Tenant

# Replies that say nothing to the model: failed ones, and rows still waiting for their text.
_SKIPPED_IN_PROMPT = {Message.Status.ERROR, Message.Status.PENDING}


def conversation_for_user(user, conversation_id: int) -> Conversation | None:
    """The conversation if it is the user's and the user is still a member of its tenant; else None."""
    return (
        Conversation.objects.select_related("tenant", "profile")
        .filter(pk=conversation_id, user=user, tenant__is_active=True, tenant__memberships__user=user)
        .first()
    )


def messages(conversation: Conversation) -> QuerySet[Message]:
    """The conversation's messages, oldest first, each with its attachments."""
    return Message.objects.filter(conversation=conversation).prefetch_related("attachments").order_by("created_at", "id")


def attachment_for_user(user, attachment_id: int) -> Attachment | None:
    """The attachment if its conversation is the user's, in a tenant they still belong to; else None."""
    return Attachment.objects.filter(
        pk=attachment_id, conversation__user=user, conversation__tenant__is_active=True,
        conversation__tenant__memberships__user=user).select_related("conversation").first()


def conversation_for_socket(user, conversation_id: int) -> Conversation:
    """The user's conversation (tenant preloaded); ChatAccessError(4403) when it is someone else's or
    the user left its tenant, ChatAccessError(4404) when there is no such conversation."""
    conversation = conversation_for_user(user, conversation_id)
    if conversation is not None:
        return conversation
    if Conversation.objects.filter(pk=conversation_id).exists():
        raise ChatAccessError(CLOSE_FORBIDDEN)
    raise ChatAccessError(CLOSE_NOT_FOUND)


def visible_thread(messages: list[Message]) -> list[Message]:
    """The messages shown in order: every user message, and only the newest reply after each one. Each
    reply shown carries `earlier_versions`: the replies it replaced (regenerated), oldest first; the
    page lets the reader page through them, the prompt never sees them."""
    thread: list[Message] = []
    for message in messages:
        if message.role == Message.Role.SYSTEM:
            continue
        message.earlier_versions = []
        if message.role == Message.Role.ASSISTANT and thread and thread[-1].role == Message.Role.ASSISTANT:
            replaced = thread[-1]
            message.earlier_versions = [*replaced.earlier_versions, replaced]
            replaced.earlier_versions = []
            thread[-1] = message  # a regenerated reply replaces the one before it
        else:
            thread.append(message)
    return thread


STALE_REPLY_ERROR = "This reply was lost before it could be saved. Regenerate it."


def is_stale_reply(message: Message, cutoff: datetime) -> bool:
    """A reply still pending although it was created before `cutoff`: nothing will save it any more."""
    return (message.role == Message.Role.ASSISTANT and message.status == Message.Status.PENDING
            and message.created_at < cutoff)


def thread(conversation: Conversation, stale_cutoff: datetime | None = None) -> list[Message]:
    """The visible thread. With `stale_cutoff`, a stale reply is shown failed, in these objects only:
    a page view writes nothing (services.fail_stale_replies stores it, on the conversation's next turn)."""
    shown = visible_thread(list(messages(conversation)))
    if stale_cutoff is not None:
        for m in shown:
            if is_stale_reply(m, stale_cutoff):
                m.status, m.error = Message.Status.ERROR, STALE_REPLY_ERROR
    return shown


def prompt_turns(thread_messages: list[Message]) -> list[dict]:
    """The thread as chat-template turns ({"role", "content"}), without failed or empty replies; a user
    message's attached files come first in its turn (chat.attachments.prompt_content)."""
    return [
        {"role": m.role, "content": prompt_content(m.content, m.attachments.all()) if m.role == Message.Role.USER
         else m.content}
        for m in thread_messages
        if m.role == Message.Role.USER or (m.status not in _SKIPPED_IN_PROMPT and m.content)
    ]


def sidebar(user, tenants: QuerySet) -> list[Conversation]:
    """The user's conversations in `tenants` with at least one message: pinned ones first, then newest
    first (tenant preloaded)."""
    return list(
        Conversation.objects.filter(user=user, tenant__in=tenants)
        .annotate(num_messages=Count("messages"))
        .filter(num_messages__gt=0)
        .select_related("tenant")
        .order_by("-is_pinned", "-updated_at", "-id")[:200]
    )


def empty_conversation(user, tenant) -> Conversation | None:
    """An untouched conversation of the user in the tenant (reused by "New chat" instead of piling up)."""
    return (
        Conversation.objects.filter(user=user, tenant=tenant)
        .annotate(num_messages=Count("messages"))
        .filter(num_messages=0)
        .order_by("-updated_at")
        .first()
    )


def usage_by_day(tenant: Tenant, *, days: int = 14, today: date | None = None) -> list[dict]:
    """Token usage of the tenant's replies per day, oldest first, one row per day (zeros included).

    Rows: {"day", "num_replies", "prompt_tokens", "cached_tokens", "output_tokens", "total_tokens"}.
    """
    first, start = daily.since(days, today)
    replies = Message.objects.filter(conversation__tenant=tenant, role=Message.Role.ASSISTANT, created_at__gte=start)
    return daily.tokens_per_day(replies, first, days, num_replies=Count("id"))
