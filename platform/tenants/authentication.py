"""Password logins: audited (auth.login, auth.login_failed, auth.login_throttled, auth.logout), and
slowed down after repeated failures for one username from one address.

    LoginView.as_view(authentication_form=ThrottledAuthenticationForm)   # pagoda.urls, the admin site

The first FREE_FAILURES failures of a (username, address) pair cost nothing (typos); each further one
locks that pair out for twice as long as the one before, from BASE_DELAY_S up to MAX_DELAY_S. A
success clears the count; a pair's count is forgotten FORGET_AFTER_S after its last failure. Other
addresses, and other usernames from the same address, are not slowed: a colleague is not locked out
by someone guessing at their name elsewhere. The address is REMOTE_ADDR, the peer of this server
(X-Forwarded-For is never trusted, as in observability.access). The counts live in Redis when
REDIS_URL is set (shared by the replicas), else in this process.
"""
from __future__ import annotations

import hashlib
import logging
import math
import threading
import time

from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.dispatch import receiver
from django.utils.translation import gettext_lazy as _

from tenants import audit

logger = logging.getLogger(__name__)

FREE_FAILURES = 3
BASE_DELAY_S = 2.0
MAX_DELAY_S = 300.0
FORGET_AFTER_S = 3600


def lock_seconds(num_failures: int) -> float:
    """How long the pair is locked out after its `num_failures`-th failure in a row."""
    if num_failures <= FREE_FAILURES:
        return 0.0
    return min(BASE_DELAY_S * 2 ** (num_failures - FREE_FAILURES - 1), MAX_DELAY_S)


def _pair_key(username: str, address: str) -> str:
    digest = hashlib.sha256(f"{username.casefold()}|{address}".encode()).hexdigest()[:32]
    return f"pagoda.login.{digest}"


class _MemoryCounts:
    """The counts of this process: {key: (num_failures, last_failure_at, locked_until)} (monotonic)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pairs: dict[str, tuple[int, float, float]] = {}

    def retry_after(self, key: str) -> float:
        with self._lock:
            entry = self._pairs.get(key)
        return max(0.0, entry[2] - time.monotonic()) if entry else 0.0

    def fail(self, key: str) -> float:
        now = time.monotonic()
        with self._lock:
            count, last, _ = self._pairs.get(key, (0, now, now))
            count = 1 if now - last > FORGET_AFTER_S else count + 1
            wait = lock_seconds(count)
            self._pairs[key] = (count, now, now + wait)
        return wait

    def clear(self, key: str) -> None:
        with self._lock:
            self._pairs.pop(key, None)


class _RedisCounts:
    """The same in Redis: <key>.n counts failures (expiring), <key>.lock exists while locked out."""

    def __init__(self, url: str):
        import redis

        self._redis = redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)

    def retry_after(self, key: str) -> float:
        ttl_ms = self._redis.pttl(f"{key}.lock")
        return ttl_ms / 1000 if ttl_ms and ttl_ms > 0 else 0.0

    def fail(self, key: str) -> float:
        pipe = self._redis.pipeline()
        pipe.incr(f"{key}.n")
        pipe.expire(f"{key}.n", FORGET_AFTER_S)
        count = pipe.execute()[0]
        wait = lock_seconds(count)
        if wait > 0:
            self._redis.set(f"{key}.lock", 1, px=int(wait * 1000))
        return wait

    def clear(self, key: str) -> None:
        self._redis.delete(f"{key}.n", f"{key}.lock")


_memory = _MemoryCounts()


def _counts():
    url = getattr(settings, "PAGODA_REDIS_URL", None)
    return _RedisCounts(url) if url else _memory


def _guarded(method: str, key: str, default: float = 0.0) -> float:
    """A Redis that is away must not stop people logging in: counted in this process meanwhile."""
    try:
        return getattr(_counts(), method)(key) or 0.0
    except Exception:  # noqa: BLE001 - redis errors
        logger.warning("login throttle: Redis unavailable, counting in this process", exc_info=True)
        return getattr(_memory, method)(key) or default


def retry_after(username: str, address: str) -> float:
    """Seconds before this pair may try again (0: now)."""
    return _guarded("retry_after", _pair_key(username, address))


def record_failure(username: str, address: str) -> float:
    """Count a failed login; returns how long the pair is now locked out (0: not)."""
    return _guarded("fail", _pair_key(username, address))


def clear(username: str, address: str) -> None:
    _guarded("clear", _pair_key(username, address))


def client_address(request) -> str:
    return request.META.get("REMOTE_ADDR", "") if request is not None else ""


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's login form, refusing a locked-out (username, address) pair before checking the password."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "throttled": _("Too many failed logins for this username from your address. "
                       "Try again in %(seconds)s seconds."),
    }

    throttled = False  # set when this attempt was refused unchecked (the login page shows why)

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        address = client_address(self.request)
        wait = retry_after(username, address) if username else 0.0
        if wait > 0:
            self.throttled = True
            audit.record("auth.login_throttled", after={"username": username[:150], "address": address})
            raise forms.ValidationError(self.error_messages["throttled"], code="throttled",
                                        params={"seconds": math.ceil(wait)})
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            if username:
                record_failure(username, address)
            raise
        clear(username, address)
        return cleaned


# --- the audit of logins and logouts (any login path: the login page, the admin's, a test client) ---
@receiver(user_logged_in, dispatch_uid="tenants.authentication.logged_in")
def _logged_in(sender, request=None, user=None, **kwargs) -> None:
    audit.record("auth.login", actor=user, instance=user, after={"address": client_address(request)})


@receiver(user_login_failed, dispatch_uid="tenants.authentication.login_failed")
def _login_failed(sender, credentials=None, request=None, **kwargs) -> None:
    username = str((credentials or {}).get("username", ""))[:150]  # Django masks the password itself
    audit.record("auth.login_failed", after={"username": username, "address": client_address(request)})


@receiver(user_logged_out, dispatch_uid="tenants.authentication.logged_out")
def _logged_out(sender, request=None, user=None, **kwargs) -> None:
    if user is not None:
        audit.record("auth.logout", actor=user, instance=user, after={"address": client_address(request)})
