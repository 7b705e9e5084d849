"""The chat WebSocket protocol: JSON text frames with a "type", parsed and built only here.

client -> server
    {"type": "user_message", "content": "...", "profile": "chat", "parent_id": 12, "attachments": [3, 4]}
                                             profile optional: the conversation's last one, else the
                                             tenant's default; parent_id optional: the message it goes
                                             on after (an older branch), else the newest one; attachments
                                             optional: ids of files uploaded to POST /chat/<id>/attachments/
                                             (content may then be empty)
    {"type": "edit", "message_id": 11, "content": "...", "profile": "chat"}
                                             the user message 11 edited and sent again: a new branch
                                             beside it (chat.branches), answered at once
    {"type": "stop"}                                                 abort the reply being generated
    {"type": "regenerate", "profile": "coding", "message_id": 11}    a new reply to the user message 11
                                                                     (optional: the current branch's last)
server -> client
    {"type": "start", "message_id": 12, "user_message_id": 11, "title": "...", "profile": "chat",
     "attachments": [{"id": 3, "name": "a.pdf", "num_tokens": 812}]}
                                             the turn is saved and the reply begins (user_message_id
                                             null when regenerating)
    {"type": "delta", "text": "..."}         one frame per engine delta that carries text (whole
                                             characters only: Korean is never split)
    {"type": "done", "message_id": 12, "status": "complete" | "stopped", "finish_reason": "stop" |
     "length" | "abort", "usage": {"prompt_tokens", "completion_tokens", "cached_tokens"}}
    {"type": "budget_warning", "message": "...", "used_tokens": 8100, "max_tokens": 10000, "resets_at": "ISO"}
                                             before "start" when a token budget of the employee is 80%
                                             spent (governance.budgets); once spent, the turn is refused
                                             with the error code "quota_exceeded", saying when it resets
    {"type": "error", "code": "...", "message": "...", "message_id": 12 | null}
                                             message_id: the reply this error ends, saved with status
                                             error, if any; code "reply_not_saved": that reply could not
                                             be saved at all (it is marked failed later, see docs/chat.md)
    {"type": "...", "followed": true, "message_id": 12, ...}
                                             a reply another tab of the conversation is writing (chat.follow):
                                             its start (with "user_content", null when regenerating, and
                                             "parent_id": the message the user message follows, or the one
                                             a regenerated reply answers), deltas,
                                             done (with the whole "content") and error frames, as that tab
                                             gets them, marked "followed" and carrying the reply's message_id;
                                             each followed delta carries "seq": its number in the reply (1, 2, ...)
    {"type": "snapshot", "followed": true, "message_id": 12, "content": "...", "seq": 7, ...}
                                             to a tab opened while another tab's reply streams, once: the
                                             start's fields, the reply's text so far ("content") and the
                                             number of deltas it covers ("seq"); the followed deltas after
                                             it (seq > 7) carry on from there
One reply at a time per conversation: a user_message or regenerate while another tab's reply runs is
refused with the error code "reply_in_progress" (chat.turn_lock); a stop from any tab stops it.
Close codes (errors.CLOSE_*): 4401 not logged in, 4403 not your conversation, 4404 no such conversation.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from chat.errors import ChatError

USER_MESSAGE, STOP, REGENERATE, EDIT = "user_message", "stop", "regenerate", "edit"
CLIENT_TYPES = (USER_MESSAGE, STOP, REGENERATE, EDIT)
_MAX_PROFILE_CHARS = 64
_MAX_ATTACHMENTS = 10  # chat.attachments.MAX_PER_MESSAGE
# Slack for the JSON around the content and for escapes (a \uXXXX escape is six characters for one).
_FRAME_OVERHEAD_CHARS = 1024
_ESCAPE_FACTOR = 6


@dataclass(frozen=True)
class ClientFrame:
    """One parsed client frame. `content` is set for user_message and edit; `profile` is a profile name or
    None; `message_id` the message edited or answered again, `parent_id` the one a user_message follows."""

    type: str
    content: str | None = None
    profile: str | None = None
    message_id: int | None = None
    parent_id: int | None = None
    attachment_ids: tuple[int, ...] = ()


def parse_client_frame(text: str | None, max_message_chars: int) -> ClientFrame:
    """Validate a raw client frame. Raises ChatError (invalid_json, invalid_frame, unknown_type,
    empty_message, message_too_long) for anything that is not a well-formed frame."""
    if text is None:
        raise ChatError("invalid_frame", "Frames must be JSON text, not binary.")
    if len(text) > max_message_chars * _ESCAPE_FACTOR + _FRAME_OVERHEAD_CHARS:
        raise ChatError("message_too_long", f"Messages are limited to {max_message_chars:,} characters.")
    try:
        data = json.loads(text)
    except ValueError:
        raise ChatError("invalid_json", "The frame is not valid JSON.") from None
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise ChatError("invalid_frame", 'A frame is a JSON object with a "type".')
    kind = data["type"]
    if kind not in CLIENT_TYPES:
        raise ChatError("unknown_type", f"Unknown frame type {kind[:40]!r}; expected one of {', '.join(CLIENT_TYPES)}.")
    if kind == STOP:
        return ClientFrame(STOP)
    profile = _profile_name(data.get("profile"))
    if kind == REGENERATE:
        return ClientFrame(REGENERATE, profile=profile, message_id=_message_id(data, "message_id"))
    attachment_ids = _attachment_ids(data.get("attachments")) if kind == USER_MESSAGE else ()
    content = _content(data.get("content"), max_message_chars, allow_empty=bool(attachment_ids))
    if kind == EDIT:
        message_id = _message_id(data, "message_id")
        if message_id is None:
            raise ChatError("invalid_frame", 'An edit needs the "message_id" of the message edited.')
        return ClientFrame(EDIT, content=content, profile=profile, message_id=message_id)
    return ClientFrame(USER_MESSAGE, content=content, profile=profile, parent_id=_message_id(data, "parent_id"),
                       attachment_ids=attachment_ids)


def _attachment_ids(value: object) -> tuple[int, ...]:
    if value is None:
        return ()
    if (not isinstance(value, list) or len(value) > _MAX_ATTACHMENTS
            or not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v < 2**63 for v in value)):
        raise ChatError("invalid_frame", f'"attachments" is a list of at most {_MAX_ATTACHMENTS} attachment ids.')
    return tuple(value)


def _message_id(data: dict, field: str) -> int | None:
    value = data.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**63:
        raise ChatError("invalid_frame", f'"{field}" must be the id of a message (a positive integer).')
    return value


def _require_utf8(value: str, field: str) -> None:
    """JSON may escape a lone surrogate (\\ud800) that no UTF-8 text, tokenizer or database can hold."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ChatError("invalid_frame", f'"{field}" holds an unpaired surrogate, which is not text.') from None


def _content(value: object, max_chars: int, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise ChatError("invalid_frame", 'A user_message or edit needs a "content" string.')
    _require_utf8(value, "content")
    value = value.replace("\x00", "")  # PostgreSQL text cannot hold NUL, and nobody types one
    if not value.strip() and not allow_empty:
        raise ChatError("empty_message", "The message is empty.")
    if len(value) > max_chars:
        raise ChatError("message_too_long", f"Messages are limited to {max_chars:,} characters (this one has {len(value):,}).")
    return value


def _profile_name(value: object) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > _MAX_PROFILE_CHARS:
        raise ChatError("invalid_frame", '"profile" must be the name of one of your sampling profiles.')
    _require_utf8(value, "profile")
    return value


# --- server frames ------------------------------------------------------------------------------------
def _dump(frame: dict) -> str:
    return json.dumps(frame, ensure_ascii=False)


def start_frame(*, message_id: int, user_message_id: int | None, title: str, profile: str,
                attachments: list[dict] | None = None) -> str:
    return _dump({"type": "start", "message_id": message_id, "user_message_id": user_message_id,
                  "title": title, "profile": profile, "attachments": attachments or []})


def delta_frame(text: str) -> str:
    return _dump({"type": "delta", "text": text})


def done_frame(*, message_id: int, status: str, finish_reason: str | None, usage: dict) -> str:
    return _dump({"type": "done", "message_id": message_id, "status": status, "finish_reason": finish_reason,
                  "usage": usage})


def budget_warning_frame(*, message: str, used_tokens: int, max_tokens: int, resets_at: str) -> str:
    return _dump({"type": "budget_warning", "message": message, "used_tokens": used_tokens, "max_tokens": max_tokens,
                  "resets_at": resets_at})


def followed(frame: str, **extra) -> str:
    """`frame` as the conversation's other tabs get it: marked "followed", with `extra` fields."""
    return _dump({**json.loads(frame), "followed": True, **extra})


def snapshot_frame(followed_start: str, content: str, seq: int) -> str:
    """The reply so far, for a tab that joined mid-reply: its followed start frame's fields, the text of
    its first `seq` deltas."""
    return _dump({**json.loads(followed_start), "type": "snapshot", "content": content, "seq": seq})


def error_frame(error: ChatError, message_id: int | None = None) -> str:
    return _dump({"type": "error", "code": error.code, "message": error.message, "message_id": message_id})
