"""A conversation as a Markdown document: what GET /chat/<id>/export.md downloads.

The visible thread (selectors.thread: the newest reply to each user message), each turn under a
heading with its time; replies keep their Markdown as the model wrote it, the user's text is quoted
so that nothing in it turns into headings of the document. Replies that failed or were stopped say so.
"""
from django.utils import timezone

from chat import selectors
from chat.models import Conversation, Message

_ROLE_HEADINGS = {Message.Role.USER: "You", Message.Role.ASSISTANT: "Assistant"}
_STATUS_NOTES = {
    Message.Status.STOPPED: "*(stopped before the end)*",
    Message.Status.ERROR: "*(failed: {error})*",
    Message.Status.PENDING: "*(incomplete)*",
}


def conversation_markdown(conversation: Conversation) -> str:
    title = conversation.title or "Untitled"
    lines = [f"# {_one_line(title)}", "",
             f"- Organisation: {_one_line(conversation.tenant.name)}",
             f"- Started: {_when(conversation.created_at)}",
             f"- Exported: {_when(timezone.now())}", ""]
    for message in selectors.thread(conversation):
        lines += [f"## {_ROLE_HEADINGS[message.role]} · {_when(message.created_at)}", ""]
        if message.role == Message.Role.USER:
            lines += [f"> {line}" if line else ">" for line in message.content.splitlines()]
            files = [f"{_one_line(a.name)} ({a.num_tokens} tokens)" for a in message.attachments.all()]
            if files:  # their text stays out of the document: it is at /chat/attachments/<id>/
                lines += ["", "Attached: " + ", ".join(files)]
        else:
            lines.append(message.content)
            if message.status == Message.Status.COMPLETE and message.finish_reason == "length":
                lines += ["", "*(cut at the length limit)*"]
        note = _STATUS_NOTES.get(message.status) if message.role == Message.Role.ASSISTANT else None
        if note:
            lines += ["", note.format(error=_one_line(message.error) or "unknown error")]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _when(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M")
