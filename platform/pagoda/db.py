"""Database calls from async code (the chat socket, the /v1 views) that give their connection back at once,
and what counts as the database being unavailable (mapped to a 503 / an error frame at each edge)."""
import functools

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, connections

# Seconds a client is told to wait (Retry-After) before retrying a request the database could not serve.
RETRY_AFTER_S = 5


def is_unavailable(exc: BaseException | None) -> bool:
    """True for a database that could not serve the call: gone, refusing connections, locked past the
    busy timeout, a pool with no connection free in time. Not for a bad query or a broken constraint
    (IntegrityError, ProgrammingError): those are bugs, answered 500."""
    return isinstance(exc, (OperationalError, InterfaceError))


def close_connections() -> None:
    """django.db.close_old_connections, except for a connection inside a transaction: that one is not
    the call's to close (a test's transaction, in the in-process API tests)."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()


def db_call(func):
    """sync_to_async(func), closing the connection the call used when it returns (CONN_MAX_AGE is 0).

    Under ASGI a request's (or a socket's) synchronous calls share a thread of their own, and Django
    closes that thread's connection only when the request finishes: a streamed /v1 answer or an open
    chat socket would hold one for its whole life, and 100 streams at once exhaust PostgreSQL's
    max_connections ("too many clients already"). channels' database_sync_to_async closes old
    connections around the call, but asgiref (3.13 here) runs the function in a copy of the caller's
    context, where Django keeps that connection: channels' close misses it, so the function closes it.
    """
    @functools.wraps(func)
    def run(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        finally:
            close_connections()

    return sync_to_async(run)
