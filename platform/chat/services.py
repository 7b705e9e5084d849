"""The chat flow's database steps, in the order a turn takes them. Synchronous: the consumer calls each
through database_sync_to_async.

    plan = plan_turn(user, conversation_id, content=..., profile_name=...)   # reads only; may raise ChatError
                     # parent_id=: go on after that message; edit_of=: fork a sent message; content=None
                     # regenerates (answer_id=: the user message to answer again)
    turn = begin_turn(plan, request_id)   # saves the user message and a pending reply, in one transaction
    finish_turn(turn.reply, stream, status=..., error=...)   # the reply's text, status and usage

Nothing is written before begin_turn, so a turn refused for bad input, a missing engine or a prompt
too long for the context leaves no trace. A reply whose finish_turn never came (its save failed while
the database was away, or its process died) stays pending until it is stale: the page then shows it
failed, and fail_stale_replies stores that (begin_turn calls it; so does `manage.py fail_stale_replies`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from chat import attachments as chat_attachments, branches, history, selectors
from chat.errors import ChatError
from chat.models import Attachment, Conversation, Message
from chat.replies import ReplyStream
from governance import ledger
from tenants import selectors as tenant_selectors
from tenants.models import SamplingProfile, SystemPrompt


@dataclass
class TurnPlan:
    """Everything a turn needs, read before anything is saved."""

    conversation: Conversation
    profile: SamplingProfile
    system_prompt: SystemPrompt | None
    turns: list[dict]  # the prompt's turns (history, then the user message to answer)
    content: str | None  # the new user message; None when regenerating
    user_parent: Message | None = None  # the message the new user message follows (None: a first message)
    answered: Message | None = None  # when regenerating: the user message answered again
    attachments: list[Attachment] = field(default_factory=list)  # sent with it (drafts until begin_turn binds them)


@dataclass
class Turn:
    user_message: Message | None
    reply: Message
    title: str


def resolve_profile(conversation: Conversation, name: str | None) -> SamplingProfile:
    """The tenant's profile called `name`; with no name, the conversation's last one, else the default."""
    tenant = conversation.tenant
    if name:
        profile = tenant_selectors.profile_by_name(tenant, name)
        if profile is None:
            raise ChatError("unknown_profile", f"Your organisation has no sampling profile called {name!r}.")
        return profile
    if conversation.profile is not None and conversation.profile.tenant_id == tenant.pk:
        return conversation.profile
    profile = tenant_selectors.default_profile(tenant) or tenant_selectors.profiles(tenant).first()
    if profile is None:
        raise ChatError("no_profile", "Your organisation has no sampling profile yet; ask an administrator.")
    return profile


def plan_turn(user, conversation_id: int, *, content: str | None, profile_name: str | None,
              parent_id: int | None = None, edit_of: int | None = None, answer_id: int | None = None,
              attachment_ids: tuple[int, ...] | list[int] = ()) -> TurnPlan:
    """Read what a turn needs; the prompt is the path to where the turn goes (chat.branches).

    content + parent_id: a new message after that message (by default the newest: the current branch).
    content + edit_of: an edited user message, a sibling of the one edited (a new branch from there).
    content=None: regenerate the reply to `answer_id` (by default the current branch's last user message).
    Raises ChatAccessError when the conversation is no longer the user's, ChatError for an unknown
    profile, a message id that is not a fitting message of this conversation, nothing to regenerate, or
    attachments that are not the conversation's unsent drafts.
    """
    conversation = selectors.conversation_for_socket(user, conversation_id)
    profile = resolve_profile(conversation, profile_name)
    system_prompt = tenant_selectors.active_system_prompt(conversation.tenant)
    tree = selectors.tree(conversation)
    attached = chat_attachments.drafts_for_turn(conversation, list(attachment_ids))
    if content is None:
        if answer_id is not None:
            answered = _message_of(tree, answer_id, Message.Role.USER)
        else:
            answered = branches.last_user_message(tree.current())
        if answered is None:
            raise ChatError("nothing_to_regenerate", "There is no message to answer again yet.")
        turns = selectors.prompt_turns(tree.path_to(answered))
        return TurnPlan(conversation, profile, system_prompt, turns, None, answered=answered)
    if edit_of is not None:
        edited = _message_of(tree, edit_of, Message.Role.USER)
        parent = tree.by_id.get(tree.parent_ids[edited.pk])
    else:
        parent = _message_of(tree, parent_id) if parent_id is not None else tree.newest()
    turns = [*selectors.prompt_turns(tree.path_to(parent)),
             {"role": "user", "content": chat_attachments.prompt_content(content, attached)}]
    return TurnPlan(conversation, profile, system_prompt, turns, content, user_parent=parent, attachments=attached)


def _message_of(tree: branches.Tree, message_id: int, role: str | None = None) -> Message:
    """The conversation's message `message_id` (of `role`); ChatError("unknown_message") otherwise, as a
    404 would say: a message of another conversation is not told apart from none."""
    message = tree.by_id.get(message_id)
    if message is None or (role is not None and message.role != role):
        kind = "message of yours" if role == Message.Role.USER else "message"
        raise ChatError("unknown_message", f"This conversation has no {kind} with the id {message_id}.")
    return message


@transaction.atomic
def begin_turn(plan: TurnPlan, request_id: str, stale_reply_s: float | None = None) -> Turn:
    """Save the user message (titling a new conversation) and the pending reply, before generation;
    with `stale_reply_s`, first store as failed the conversation's replies pending for longer."""
    conversation = plan.conversation
    if stale_reply_s is not None:
        fail_stale_replies(stale_reply_s, conversation)
    user_message = None
    if plan.content is not None:
        user_message = history.add_user_message(
            conversation, plan.content, parent=plan.user_parent,
            title_source=plan.content.strip() or ", ".join(a.name for a in plan.attachments))
        chat_attachments.bind(plan.attachments, user_message)
    if conversation.profile_id != plan.profile.pk:  # the next turn starts with the profile picked last
        Conversation.objects.filter(pk=conversation.pk).update(profile=plan.profile)
        conversation.profile = plan.profile
    reply = history.create_pending_reply(conversation, profile=plan.profile, system_prompt=plan.system_prompt,
                                         parent=user_message or plan.answered)
    reply.request_id = request_id
    reply.save(update_fields=["request_id"])
    return Turn(user_message, reply, conversation.title)


def finish_turn(reply: Message, stream: ReplyStream, *, status: str | None = None, error: str = "") -> Message | None:
    """Store what the reply became; status defaults to the stream's (complete / stopped).

    Returns None when the conversation was deleted meanwhile (there is nothing left to save into).
    """
    status = status or stream.status
    finish_reason = stream.finish_reason or ("abort" if status == Message.Status.STOPPED else "")
    usage = {"num_prompt_tokens": stream.num_prompt_tokens, "num_cached_tokens": stream.num_cached_tokens,
             "num_output_tokens": stream.num_output_tokens, **stream.timings_ms()}
    # governance: the reply's ledger row (releases its budget reservation), kept even if the conversation is gone
    ledger.record_chat_reply(reply, status=status, finish_reason=finish_reason, **usage)
    if not Message.objects.filter(pk=reply.pk).exists():
        return None
    return history.finish_reply(
        reply,
        content=stream.text.replace("\x00", ""),
        status=status,
        finish_reason=finish_reason,
        error=error,
        **usage,
    )


STALE_REPLY_ERROR = selectors.STALE_REPLY_ERROR


def stale_cutoff(older_than_s: float):
    """Replies created before this and still pending are stale (selectors.is_stale_reply)."""
    return timezone.now() - timedelta(seconds=older_than_s)


def fail_stale_replies(older_than_s: float, conversation: Conversation | None = None) -> int:
    """Mark the replies pending for longer than `older_than_s` as error, in one conversation or (None) in
    all; returns how many.

    No replica can tell whether another one still streams a pending reply, so only age decides: past
    the bound (PAGODA_CHAT_STALE_REPLY_SECONDS, longer than any reply takes) nothing will save it. A
    reply still streaming past it is saved over the error when it ends.
    """
    stale = Message.objects.filter(role=Message.Role.ASSISTANT, status=Message.Status.PENDING,
                                   created_at__lt=stale_cutoff(older_than_s))
    if conversation is not None:
        stale = stale.filter(conversation=conversation)
    return stale.update(status=Message.Status.ERROR, error=STALE_REPLY_ERROR, completed_at=timezone.now())


def new_conversation(user, tenant) -> Conversation:
    """The conversation "New chat" opens: an untouched one of the user in the tenant, else a new one."""
    return selectors.empty_conversation(user, tenant) or history.create_conversation(tenant, user)


def delete_conversation(user, conversation_id: int) -> bool:
    """Delete the user's conversation; False when it is not theirs or does not exist."""
    conversation = selectors.conversation_for_user(user, conversation_id)
    if conversation is None:
        return False
    history.delete_conversation(conversation, user)
    return True
