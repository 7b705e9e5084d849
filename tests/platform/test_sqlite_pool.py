"""pagoda.sqlite_pool: a SQLite connection closed by one database call is the one the next call opens,
except where keeping it would be wrong (closed in a transaction, a replaced file, a forked child)."""
import multiprocessing
import sqlite3
import threading

import pytest
from django.db.utils import ConnectionHandler

from pagoda import env
from pagoda.sqlite_pool.base import IDLE, IDLE_CONNECTIONS, file_identity


@pytest.fixture
def database(tmp_path, django_db_blocker):
    """A ConnectionHandler on a fresh SQLite file, with the server's options (not the test database)."""
    django_db_blocker.unblock()
    path = tmp_path / "pool.sqlite3"
    handler = ConnectionHandler({"default": {"ENGINE": "pagoda.sqlite_pool", "NAME": str(path),
                                             "OPTIONS": env.sqlite_options(None)}})
    connection = handler["default"]
    with connection.cursor() as cursor:  # the file exists from here on: connections to it may be kept
        cursor.execute("CREATE TABLE note (text TEXT)")
    connection.close()
    yield handler, path
    handler.close_all()
    django_db_blocker.restore()


def raw(connection):
    connection.ensure_connection()
    return connection.connection


def test_a_closed_connection_is_the_next_one_opened_in_any_thread(database):
    handler, _ = database
    connection = handler["default"]
    first = raw(connection)
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO note VALUES ('kept')")
    connection.close()
    assert connection.connection is None
    assert raw(connection) is first

    connection.close()
    seen = []
    other = threading.Thread(target=lambda: seen.append((raw(handler["default"]), _notes(handler["default"]))))
    other.start()
    other.join()
    assert seen == [(first, ["kept"])]


def _notes(connection):
    with connection.cursor() as cursor:
        cursor.execute("SELECT text FROM note")
        return [row[0] for row in cursor.fetchall()]


def test_a_connection_closed_inside_a_transaction_is_really_closed(database):
    handler, _ = database
    connection = handler["default"]
    first = raw(connection)
    connection.set_autocommit(False)
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO note VALUES ('never committed')")
    assert first.in_transaction
    connection.close()
    with pytest.raises(sqlite3.ProgrammingError):
        first.execute("SELECT 1")
    connection.set_autocommit(True)
    assert raw(connection) is not first
    assert _notes(connection) == []


def test_a_replaced_file_gets_new_connections_and_the_old_ones_are_closed(database):
    handler, path = database
    connection = handler["default"]
    old = raw(connection)
    connection.close()
    path.unlink()
    sqlite3.connect(path).execute("CREATE TABLE note (text TEXT)").connection.close()

    new = raw(connection)
    assert new is not old
    with pytest.raises(sqlite3.ProgrammingError):
        old.execute("SELECT 1")
    assert _notes(connection) == []


def test_the_pool_keeps_at_most_its_size(database):
    handler, path = database
    opened = []
    barrier = threading.Barrier(IDLE_CONNECTIONS + 2)

    def call():
        connection = handler["default"]
        opened.append(raw(connection))
        barrier.wait()  # every thread holds its own connection at once
        connection.close()

    threads = [threading.Thread(target=call) for _ in range(IDLE_CONNECTIONS + 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(c) for c in opened}) == IDLE_CONNECTIONS + 2
    closed = 0
    for c in opened:
        try:
            c.execute("SELECT 1")
        except sqlite3.ProgrammingError:
            closed += 1
    assert closed == 2
    assert len(IDLE.idle[str(path)][1]) == IDLE_CONNECTIONS


def _take_in_child(path, identity, answer):
    answer.send(IDLE.take(path, identity) is None)


def test_a_forked_child_never_takes_its_parents_connections(database):
    handler, path = database
    connection = handler["default"]
    raw(connection)
    connection.close()
    identity = file_identity(str(path))
    assert IDLE.idle[str(path)][1]
    fork = multiprocessing.get_context("fork")
    parent_end, child_end = fork.Pipe()
    child = fork.Process(target=_take_in_child, args=(str(path), identity, child_end))
    child.start()
    assert parent_end.recv() is True
    child.join()
    assert IDLE.take(str(path), identity) is not None


def test_an_in_memory_database_is_not_kept():
    assert file_identity(":memory:") is None
    assert file_identity("file:memorydb_default?mode=memory&cache=shared") is None
