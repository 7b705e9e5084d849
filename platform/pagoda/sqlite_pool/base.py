"""Django's SQLite backend, except that a closed connection is kept for the next one of this process.

Every database call from async code (pagoda.db.db_call) closes its connection when it returns, and so
does every page request (CONN_MAX_AGE 0): PostgreSQL has a connection limit. On SQLite a new
connection costs more than most calls' queries: Django registers its SQL functions and runs the
pragmas on each, and closing the last connection of a WAL database checkpoints the log into the file
and syncs it. Here a closed connection goes back to a small pool and the next connect takes it.

A connection is really closed when it is closed inside a transaction, when the pool is full, or
when its file is no longer the one at the database's path (deleted and made again). A process never
uses connections its parent opened before a fork.
"""
from __future__ import annotations

import os
import threading

from django.db.backends.sqlite3 import base

# Idle connections kept per database file: as many as the threads that call at once in a busy server
# (the chat sockets' thread, /v1 calls, the page requests let through at once); more are closed.
IDLE_CONNECTIONS = 8


def file_identity(database: str) -> tuple | None:
    """(device, inode) of the database's file; None for an in-memory database or a file that does not
    exist yet (connections to those are not kept)."""
    try:
        stat = os.stat(database)
    except (OSError, ValueError):
        return None
    return stat.st_dev, stat.st_ino


class IdleConnections:
    """The idle connections of this process, by database path; the most recently closed is taken
    first. Those of a file that was replaced at its path are closed when the path is next used."""

    def __init__(self, size: int = IDLE_CONNECTIONS):
        self.size = size
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.idle: dict[str, tuple[tuple, list]] = {}  # path -> (file identity, connections)

    def take(self, path: str, identity: tuple):
        with self.lock:
            connections = self._of(path, identity)
            return connections.pop() if connections else None

    def give(self, path: str, identity: tuple, connection) -> bool:
        """Keep `connection`; False when it is not kept (the caller closes it)."""
        with self.lock:
            connections = self._of(path, identity)
            if len(connections) >= self.size:
                return False
            connections.append(connection)
            return True

    def _of(self, path: str, identity: tuple) -> list:
        if self.pid != os.getpid():
            # A forked child shares its parent's open files: using those connections would corrupt both.
            self.pid, self.idle = os.getpid(), {}
        kept_identity, connections = self.idle.get(path, (identity, []))
        if kept_identity != identity:
            for stale in connections:
                stale.close()
            connections = []
        self.idle[path] = (identity, connections)
        return connections


IDLE = IdleConnections()


class DatabaseWrapper(base.DatabaseWrapper):
    file: tuple | None = None  # (path, identity) of the connection's file when it may be kept

    def get_new_connection(self, conn_params):
        path = conn_params["database"]
        identity = file_identity(path)
        connection = IDLE.take(path, identity) if identity else None
        if connection is None:
            connection = super().get_new_connection(conn_params)
        self.file = (path, identity) if identity else None
        return connection

    def _close(self):
        connection = self.connection
        if connection is not None and self.file is not None and not connection.in_transaction:
            path, identity = self.file
            if file_identity(path) == identity and IDLE.give(path, identity, connection):
                return None
        return super()._close()
