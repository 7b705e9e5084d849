"""Reads of the chat flow: a conversation's branches and its current one, the sidebar, and who may
open what.

Regenerating a reply or editing a sent message keeps the earlier version (its tokens stay in the
tenant's usage) and adds a sibling (chat.branches): the page shows the current branch first and pages
through the others; the prompt is the path to where the turn goes.
"""
from __future__ import annotations

from datetime import date, datetime

from django.db.models import Count, QuerySet

from chat.attachments import prompt_content
from chat.branches import Tree
from chat.errors import CLOSE_FORBIDDEN, CLOSE_NOT_FOUND, ChatAccessError
from chat.models import Attachment, Conversation, Feedback, Message
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


def reply_for_user(user, conversation_id: int, message_id: int) -> Message | None:
    """An assistant reply of the user's conversation (as conversation_for_user decides); else None."""
    conversation = conversation_for_user(user, conversation_id)
    if conversation is None:
        return None
    return Message.objects.filter(pk=message_id, conversation=conversation, role=Message.Role.ASSISTANT).first()


def feedback_by_message(user, message_ids: list[int]) -> dict[int, Feedback]:
    """The user's feedback on these messages, by message id."""
    return {f.message_id: f for f in Feedback.objects.filter(user=user, message_id__in=message_ids)}


def conversation_for_socket(user, conversation_id: int) -> Conversation:
    """The user's conversation (tenant preloaded); ChatAccessError(4403) when it is someone else's or
    the user left its tenant, ChatAccessError(4404) when there is no such conversation."""
    conversation = conversation_for_user(user, conversation_id)
    if conversation is not None:
        return conversation
    if Conversation.objects.filter(pk=conversation_id).exists():
        raise ChatAccessError(CLOSE_FORBIDDEN)
    raise ChatAccessError(CLOSE_NOT_FOUND)


STALE_REPLY_ERROR = "This reply was lost before it could be saved. Regenerate it."


def is_stale_reply(message: Message, cutoff: datetime) -> bool:
    """A reply still pending although it was created before `cutoff`: nothing will save it any more."""
    return (message.role == Message.Role.ASSISTANT and message.status == Message.Status.PENDING
            and message.created_at < cutoff)


def _mark_stale(shown: list[Message], stale_cutoff: datetime | None) -> list[Message]:
    """A stale reply is shown failed, in these objects only: a page view writes nothing
    (services.fail_stale_replies stores it, on the conversation's next turn)."""
    if stale_cutoff is not None:
        for m in shown:
            if is_stale_reply(m, stale_cutoff):
                m.status, m.error = Message.Status.ERROR, STALE_REPLY_ERROR
    return shown


def tree(conversation: Conversation) -> Tree:
    """Every message of the conversation, as branches (chat.branches)."""
    return Tree(messages(conversation))


def thread(conversation: Conversation, stale_cutoff: datetime | None = None) -> list[Message]:
    """The current branch (the path to the newest message), oldest first; stale replies shown failed."""
    return _mark_stale(tree(conversation).current(), stale_cutoff)


def page_messages(conversation: Conversation, stale_cutoff: datetime | None = None) -> list[Message]:
    """Every message, oldest first, for the page to page through branches: each carries `parent_ref`
    (its parent's id, or None) and `on_branch` (whether it is on the current branch, shown first)."""
    conversation_tree = tree(conversation)
    current = {m.pk for m in conversation_tree.current()}
    for m in conversation_tree.messages:
        m.parent_ref = conversation_tree.parent_ids[m.pk]
        m.on_branch = m.pk in current
    return _mark_stale(conversation_tree.messages, stale_cutoff)


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
