"""Writes for chat history: conversations and their messages. The chat flow (chat.services) calls these;
nothing else saves Message rows."""
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from chat.models import Conversation, Message
from tenants import selectors
from tenants.models import SamplingProfile, SystemPrompt, Tenant

TITLE_CHARS = 80
# The parent a new message gets when none is named: it goes on after the conversation's newest message
# (a reply: after its newest user message), as when every conversation was a single line.
LAST = object()


def _last(conversation: Conversation, role: str | None = None) -> Message | None:
    rows = Message.objects.filter(conversation=conversation).exclude(role=Message.Role.SYSTEM)
    if role is not None:
        rows = rows.filter(role=role)
    return rows.order_by("-created_at", "-id").first()


def create_conversation(tenant: Tenant, user, *, title: str = "", profile: SamplingProfile | None = None) -> Conversation:
    """A new conversation of `user` in `tenant`. Raises PermissionDenied when the user is not a member."""
    if not selectors.is_member(user, tenant):
        raise PermissionDenied("not a member of this tenant")
    if profile is not None and profile.tenant_id != tenant.pk:
        raise ValidationError({"profile": "This profile belongs to another tenant."})
    return Conversation.objects.create(tenant=tenant, user=user, title=title[:200], profile=profile)


@transaction.atomic
def add_user_message(conversation: Conversation, content: str, *, parent: Message | None | object = LAST,
                     title_source: str | None = None) -> Message:
    """Save the user's turn (before generation starts) after `parent` (None: a first message, or an edit
    of one); the first one titles an untitled conversation (from `title_source`, by default the content:
    a message of files alone is titled by their names)."""
    if parent is LAST:
        parent = _last(conversation)
    message = Message.objects.create(conversation=conversation, role=Message.Role.USER, content=content, parent=parent)
    if not conversation.title:
        conversation.title = " ".join((title_source or content).split())[:TITLE_CHARS]
    conversation.save(update_fields=["title", "updated_at"])
    return message


def create_pending_reply(
    conversation: Conversation, *, profile: SamplingProfile | None, system_prompt: SystemPrompt | None,
    parent: Message | None | object = LAST,
) -> Message:
    """The assistant row answering the user message `parent`, saved as pending before streaming so a
    dropped socket leaves a trace."""
    if parent is LAST:
        parent = _last(conversation, Message.Role.USER)
    return Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        status=Message.Status.PENDING,
        profile=profile,
        system_prompt=system_prompt,
        parent=parent,
    )


def finish_reply(
    message: Message,
    *,
    content: str,
    status: str,
    finish_reason: str = "",
    num_prompt_tokens: int = 0,
    num_cached_tokens: int = 0,
    num_output_tokens: int = 0,
    time_to_first_token_ms: int | None = None,
    duration_ms: int | None = None,
    error: str = "",
) -> Message:
    """Store the reply's text, final status (complete / stopped / error) and token usage."""
    if status not in {Message.Status.COMPLETE, Message.Status.STOPPED, Message.Status.ERROR}:
        raise ValueError(f"not a final status: {status!r}")
    message.content = content
    message.status = status
    message.finish_reason = finish_reason or ""
    message.error = error
    message.num_prompt_tokens = num_prompt_tokens
    message.num_cached_tokens = num_cached_tokens
    message.num_output_tokens = num_output_tokens
    message.time_to_first_token_ms = time_to_first_token_ms
    message.duration_ms = duration_ms
    message.completed_at = timezone.now()
    message.save()
    Conversation.objects.filter(pk=message.conversation_id).update(updated_at=message.completed_at)
    return message


def rename_conversation(conversation: Conversation, title: str) -> str:
    """Give the conversation `title` (whitespace collapsed); returns it. ValidationError when it is empty
    or longer than the column. Its place in the sidebar stays: renaming is not activity."""
    title = " ".join(str(title).split())
    if not title:
        raise ValidationError({"title": "The title is empty."})
    max_chars = Conversation._meta.get_field("title").max_length
    if len(title) > max_chars:
        raise ValidationError({"title": f"A title holds at most {max_chars} characters (this one has {len(title)})."})
    Conversation.objects.filter(pk=conversation.pk).update(title=title)  # update(): updated_at stays
    conversation.title = title
    return title


def set_pinned(conversation: Conversation, pinned: bool) -> None:
    """Pin the conversation to the top of its owner's sidebar, or unpin it (its place otherwise stays)."""
    Conversation.objects.filter(pk=conversation.pk).update(is_pinned=pinned)
    conversation.is_pinned = pinned


def delete_conversation(conversation: Conversation, user) -> None:
    """Delete a conversation of `user` (and its messages). Raises PermissionDenied for anyone else's."""
    if conversation.user_id != user.pk:
        raise PermissionDenied("not your conversation")
    conversation.delete()
