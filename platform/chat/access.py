"""Whether an open chat socket may still serve its user: asked before every turn, and again whenever
the user's access changes (chat.revocation). Synchronous (the ORM); the consumer calls through db_call.

The socket was authenticated once, at connect, from its session cookie. Since then the session may
have ended (logout, a password change, an administrator deleting it), the user may have been
deactivated or deleted, or may have left the conversation's tenant, or the tenant may have been
deactivated. Each check reads the session afresh from the session store, never the copy the
socket's scope holds.
"""
from __future__ import annotations

from importlib import import_module
from types import SimpleNamespace

from django.conf import settings
from django.contrib import auth

from chat import selectors
from chat.errors import CLOSE_UNAUTHENTICATED, ChatAccessError
from chat.models import Conversation


def session_user(session_key: str | None):
    """The active user the session `session_key` logs in now, or None (ended, expired, its password
    changed since, the user inactive or gone). A session whose password hash no longer matches is
    flushed, as Django does for an HTTP request."""
    if not session_key:
        return None
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)
    user = auth.get_user(SimpleNamespace(session=store))  # the backend's checks and the hash check
    if not user.is_authenticated or not user.is_active:
        return None
    return user


def verify_session(user_id: int, session_key: str | None) -> None:
    """ChatAccessError(4401) unless `session_key` still logs in the user `user_id`."""
    user = session_user(session_key)
    if user is None or user.pk != user_id:
        raise ChatAccessError(CLOSE_UNAUTHENTICATED)


def verify_socket(user, session_key: str | None, conversation_id: int) -> Conversation:
    """The conversation, when the session still logs `user` in and the conversation is still theirs in
    an active tenant they belong to; ChatAccessError (4401, 4403, 4404) otherwise."""
    verify_session(user.pk, session_key)
    return selectors.conversation_for_socket(user, conversation_id)
