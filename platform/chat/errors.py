"""What can go wrong in a chat turn, as the `code` of an error frame; engine errors are mapped here, once."""
from __future__ import annotations

from engine_runtime import EngineUnavailable
from governance.budgets import QuotaExceeded
from inference.errors import EngineDeadError, EngineError, InvalidRequestError, PromptTooLongError, QueueFullError
from pagoda.db import is_unavailable

# WebSocket close codes (4000-4999 is the application's range; these mirror HTTP's meaning).
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404


class ChatError(Exception):
    """A turn that cannot go on: `code` for programs, `message` for people (sent in an error frame)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class AttachmentError(Exception):
    """A file that cannot be attached: `code` for programs, `message` for people, `status` its HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


class ChatAccessError(Exception):
    """The socket may not serve this conversation; `close_code` is one of the CLOSE_* codes."""

    def __init__(self, close_code: int):
        super().__init__(f"close {close_code}")
        self.close_code = close_code


def access_error(close_code: int) -> ChatError:
    """The error frame a socket sends before it closes with `close_code` because access ended mid-way
    (a logout, deactivation, removal from the tenant, the conversation deleted)."""
    if close_code == CLOSE_UNAUTHENTICATED:
        return ChatError("signed_out", "Your session has ended (signed out, or the account was changed); log in again.")
    if close_code == CLOSE_FORBIDDEN:
        return ChatError("access_revoked", "You no longer have access to this conversation's organisation.")
    return ChatError("conversation_gone", "This conversation no longer exists.")


# What the consumer catches around a turn; anything else is a bug (logged, answered "internal_error").
EXPECTED_ERRORS = (ChatError, EngineError, EngineUnavailable, QuotaExceeded)


def to_chat_error(exc: BaseException) -> ChatError:
    """The error frame's code and message for an exception raised while planning or streaming a turn."""
    if isinstance(exc, ChatError):
        return exc
    if isinstance(exc, QuotaExceeded):  # a token budget is spent; the message says when it resets
        return ChatError("quota_exceeded", exc.message)
    if isinstance(exc, PromptTooLongError):
        return ChatError("context_length_exceeded", f"The message does not fit the model's context: {exc}")
    if isinstance(exc, InvalidRequestError):
        return ChatError("invalid_request", f"The engine refused the request: {exc}")
    if isinstance(exc, QueueFullError):
        return ChatError("engine_overloaded", f"The engine is busy; try again in a moment ({exc}).")
    if isinstance(exc, EngineUnavailable):
        return ChatError("engine_unavailable", f"The engine is not available: {exc.reason}")
    if isinstance(exc, EngineDeadError):
        return ChatError("engine_unavailable", f"The engine stopped: {exc}")
    if isinstance(exc, EngineError):
        return ChatError("engine_error", f"The engine failed: {exc}")
    if is_unavailable(exc):  # gone, or locked past the busy timeout: nothing of the turn was saved
        return ChatError("database_unavailable", "The database is busy or unavailable; try again in a moment.")
    return ChatError("internal_error", "Something went wrong on the server; the error was logged.")
