"""Files attached to chat messages: upload (a draft of the conversation), send (bound to the user
message), and how their text reaches the model.

    attachment = add_draft(conversation, name, data, count_tokens=engine.count_tokens, max_model_len=...)
    attachments = drafts_for_turn(conversation, attachment_ids)   # in plan_turn; ChatError when not all usable
    bind(attachments, user_message)                                # in begin_turn
    prompt_content(message.content, attachments)                    # the user turn the model reads

The model reads each file's text before the user's own words, one block per file, in the order
attached:

    <file name="report.pdf">
    ...the extracted text...
    </file>

    Summarise the report.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from chat import file_text
from chat.errors import AttachmentError, ChatError
from chat.models import Attachment, Conversation, Message

MAX_PER_MESSAGE = 10
# A file may fill at most this part of the context: the rest is for the question, the system prompt
# and the reply (the consumer reserves up to a quarter of the context for the reply).
CONTEXT_SHARE = 0.75


def token_budget(max_model_len: int) -> int:
    """The most tokens one attached file may have."""
    return int(max_model_len * CONTEXT_SHARE)


def add_draft(conversation: Conversation, name: str, data: bytes, *, count_tokens: Callable[[str], int],
              max_model_len: int) -> Attachment:
    """Extract the file's text, count its tokens and keep it as a draft of the conversation. Raises
    AttachmentError for a file that cannot be read or that does not fit the model's context."""
    name = (name or "file").replace("\x00", "").strip()[-255:] or "file"
    kind, text = file_text.extract_text(name, data)
    num_tokens = count_tokens(_block(name, text))
    budget = token_budget(max_model_len)
    if num_tokens > budget:
        raise AttachmentError("context_length_exceeded", f"{name!r} has {num_tokens:,} tokens; a file may have at most "
                              f"{budget:,} for this model's context. Attach a shorter part.", status=413)
    return Attachment.objects.create(conversation=conversation, name=name, kind=kind, size_bytes=len(data), text=text,
                                     num_tokens=num_tokens)


def drafts_for_turn(conversation: Conversation, attachment_ids: list[int]) -> list[Attachment]:
    """The conversation's unsent attachments `attachment_ids`, in that order; ChatError when one is
    someone else's, already sent, deleted or unknown."""
    if not attachment_ids:
        return []
    if len(attachment_ids) > MAX_PER_MESSAGE or len(set(attachment_ids)) != len(attachment_ids):
        raise ChatError("invalid_attachments", f"A message carries at most {MAX_PER_MESSAGE} different files.")
    found = {a.pk: a for a in Attachment.objects.filter(pk__in=attachment_ids, conversation=conversation,
                                                        message__isnull=True)}
    if len(found) != len(attachment_ids):
        raise ChatError("unknown_attachment", "An attached file is gone (removed, or sent already); attach it again.")
    return [found[pk] for pk in attachment_ids]


def bind(attachments: Iterable[Attachment], message: Message) -> None:
    """The drafts now belong to the sent user message."""
    Attachment.objects.filter(pk__in=[a.pk for a in attachments]).update(message=message)


def _block(name: str, text: str) -> str:
    return f'<file name="{name}">\n{text}\n</file>'


def prompt_content(content: str, attachments: Iterable[Attachment]) -> str:
    """The user turn as the model reads it: each file's block, then the message."""
    blocks = [_block(a.name, a.text) for a in attachments]
    return "\n\n".join([*blocks, content] if content else blocks)

