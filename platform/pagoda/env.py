"""Turns environment strings into settings values. Pure functions, so they are tested without Django."""
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_bool(value: str | None, default: bool) -> bool:
    """'1/true/yes/on' -> True, '0/false/no/off/' -> False, None -> default; anything else is an error."""
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"not a boolean: {value!r}")


def parse_list(value: str | None, default: list[str]) -> list[str]:
    """A comma-separated list; blanks dropped."""
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def positive_int(value: str | None, default: int, name: str) -> int:
    """A whole number of at least 1; None -> default."""
    try:
        num = int(value) if value is not None else default
    except ValueError:
        num = 0
    if num < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, not {value!r}")
    return num


def parse_database_url(url: str | None, default_sqlite_path: Path) -> dict:
    """DATABASE_URL -> a Django DATABASES['default'] dict.

    postgres://user:pass@host:port/name?sslmode=require -> psycopg 3 backend (options from the query string);
    sqlite:///relative/or/absolute.sqlite3 -> SQLite; unset -> SQLite file at default_sqlite_path.
    """
    if not url:
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": str(default_sqlite_path)}
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        # sqlite:///var/x.sqlite3 is relative, sqlite:////abs/x.sqlite3 absolute (as dj-database-url reads it)
        name = parsed.path[1:] if parsed.path.startswith("/") else parsed.path
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": name or ":memory:"}
    if parsed.scheme in {"postgres", "postgresql", "pgsql"}:
        options = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")) or "postgres",
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            "OPTIONS": options,
        }
    raise ValueError(f"unsupported DATABASE_URL scheme {parsed.scheme!r} (use postgres:// or sqlite://)")


def database_pool(size: str | None, timeout_s: str | None) -> dict | None:
    """PAGODA_DB_POOL_SIZE / PAGODA_DB_POOL_TIMEOUT_SECONDS -> Django's OPTIONS["pool"] (psycopg_pool), or
    None for no pool (unset or 0: every database call opens its own connection, as CONN_MAX_AGE=0 does).

    A pooled call skips PostgreSQL's connection set-up (3.2 -> 0.2 ms per call on one host) and caps the
    process at `size` sessions. The cost is in an outage: a call then waits up to the timeout for a
    connection before it fails, where an unpooled one fails at once.
    """
    try:
        num = int(size or 0)
    except ValueError:
        num = -1
    if num < 0:
        raise ValueError(f"PAGODA_DB_POOL_SIZE must be a whole number, 0 (no pool) or more, not {size!r}")
    if num == 0:
        return None
    try:
        timeout = float(timeout_s or 3.0)
    except ValueError:
        timeout = 0.0
    if not timeout > 0:
        raise ValueError(f"PAGODA_DB_POOL_TIMEOUT_SECONDS must be a positive number of seconds, not {timeout_s!r}")
    # min_size 0: an idle process holds no session; a connection made is kept until it has been idle
    # for max_idle seconds (psycopg_pool's default, 10 minutes).
    return {"min_size": 0, "max_size": num, "timeout": timeout}


# Every new SQLite connection (one per request: CONN_MAX_AGE is 0) runs these. WAL lets readers go on
# while one writer writes (journal_mode persists in the file; repeating it is a no-op). synchronous NORMAL
# is safe under WAL: a crashed process loses nothing, a power cut at most the last commits, never the
# file. The rest bound the WAL file and keep hot pages in memory (Rails' and Django guides' defaults).
SQLITE_PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA journal_size_limit=67108864",
                  "PRAGMA mmap_size=134217728", "PRAGMA cache_size=2000")


def sqlite_options(busy_timeout_s: str | None) -> dict:
    """PAGODA_SQLITE_BUSY_TIMEOUT_SECONDS -> Django's SQLite OPTIONS: a burst of writers queues instead of failing.

    SQLite has one writer at a time. A connection that finds the write lock taken waits up to the busy
    timeout (default 20 s, Django's is 5) before "database is locked". IMMEDIATE makes every transaction
    take the write lock when it begins: a DEFERRED one that read first and then writes cannot wait (the
    snapshot it read may be stale) and fails at once, whatever the timeout.
    """
    try:
        timeout = float(busy_timeout_s or 20.0)
    except ValueError:
        timeout = 0.0
    if not timeout > 0:
        raise ValueError(f"PAGODA_SQLITE_BUSY_TIMEOUT_SECONDS must be a positive number of seconds, "
                         f"not {busy_timeout_s!r}")
    return {"timeout": timeout, "transaction_mode": "IMMEDIATE", "init_command": ";".join(SQLITE_PRAGMAS)}


# channels-redis waits on Redis in blocking pops of 5 s; redis-py gives up on any read after
# its default socket_timeout (redis-py 8), also 5 s. Equal, they race: every consumer idle for 5 s died with
# redis.exceptions.TimeoutError. Reads now wait well past the pop's own timeout.
REDIS_LAYER_SOCKET_TIMEOUT_S = 30


def channel_layers(redis_url: str | None) -> dict:
    """REDIS_URL -> channels-redis; unset -> the in-memory layer (one process only)."""
    if redis_url:
        return {
            "default": {
                "BACKEND": "channels_redis.core.RedisChannelLayer",
                "CONFIG": {"hosts": [{"address": redis_url, "socket_timeout": REDIS_LAYER_SOCKET_TIMEOUT_S}]},
            }
        }
    return {"default": {"BACKEND": "pagoda.channel_layer.InMemoryChannelLayer"}}
