from pathlib import Path

import pytest

from pagoda import env


def test_default_database_is_sqlite_file():
    db = env.parse_database_url(None, Path("/x/var/pagoda.sqlite3"))
    assert db == {"ENGINE": "django.db.backends.sqlite3", "NAME": "/x/var/pagoda.sqlite3"}


def test_postgres_url_uses_psycopg_backend_with_options():
    db = env.parse_database_url("postgres://u:p%40ss@db.local:5433/pagoda?sslmode=require", Path("unused"))
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["USER"], db["PASSWORD"], db["HOST"], db["PORT"], db["NAME"]) == ("u", "p@ss", "db.local", "5433", "pagoda")
    assert db["OPTIONS"] == {"sslmode": "require"}


def test_sqlite_url_and_bad_scheme():
    assert env.parse_database_url("sqlite:////tmp/a.sqlite3", Path("unused"))["NAME"] == "/tmp/a.sqlite3"
    with pytest.raises(ValueError, match="mysql"):
        env.parse_database_url("mysql://x/y", Path("unused"))


def test_database_pool_is_off_unless_sized():
    assert env.database_pool(None, None) is None and env.database_pool("0", "9") is None
    assert env.database_pool("8", None) == {"min_size": 0, "max_size": 8, "timeout": 3.0}
    assert env.database_pool("2", "0.5")["timeout"] == 0.5
    for size, timeout in [("-1", None), ("many", None), ("4", "0"), ("4", "soon"), ("4", "nan")]:
        with pytest.raises(ValueError, match="PAGODA_DB_POOL"):
            env.database_pool(size, timeout)


def test_channel_layers_follow_redis_url():
    assert env.channel_layers(None)["default"]["BACKEND"] == "pagoda.channel_layer.InMemoryChannelLayer"
    layer = env.channel_layers("redis://127.0.0.1:6379/1")["default"]
    assert layer["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    assert layer["CONFIG"]["hosts"] == [{"address": "redis://127.0.0.1:6379/1", "socket_timeout": 30}]


def test_parse_bool_and_list():
    assert env.parse_bool("Yes", False) is True and env.parse_bool(None, True) is True
    with pytest.raises(ValueError):
        env.parse_bool("maybe", False)
    assert env.parse_list("a, b,,c", []) == ["a", "b", "c"]


def test_sqlite_options_queue_writers():
    options = env.sqlite_options(None)
    assert options["timeout"] == 20.0 and options["transaction_mode"] == "IMMEDIATE"
    assert "PRAGMA journal_mode=WAL" in options["init_command"].split(";")
    assert env.sqlite_options("2.5")["timeout"] == 2.5
    for value in ["0", "-1", "soon", "nan"]:
        with pytest.raises(ValueError, match="PAGODA_SQLITE_BUSY_TIMEOUT_SECONDS"):
            env.sqlite_options(value)


def test_positive_int():
    assert env.positive_int(None, 16, "N") == 16 and env.positive_int("3", 16, "N") == 3
    for value in ["0", "-2", "many"]:
        with pytest.raises(ValueError, match="N must be"):
            env.positive_int(value, 16, "N")
