"""The audit of logins and account changes, and failed password logins slowed down per username and
address (tenants.authentication, tenants.accounts), through the real login page and admin site."""
import re
import secrets

import pytest
from django.contrib.sessions.models import Session
from django.test import Client

from tenants import authentication
from tenants.models import AuditLog

HERE, ELSEWHERE = "10.0.0.1", "10.0.0.2"


@pytest.fixture(autouse=True)
def _counts_in_this_process(settings):
    settings.PAGODA_REDIS_URL = None  # the Redis counts have their own test, with names of their own
    authentication._memory._pairs.clear()
    yield
    authentication._memory._pairs.clear()


def _login(username: str, password: str, address: str = HERE, path: str = "/accounts/login/"):
    return Client(REMOTE_ADDR=address).post(path, {"username": username, "password": password})


def _entries(action: str) -> list[AuditLog]:
    return list(AuditLog.objects.filter(action=action).order_by("id"))


@pytest.mark.django_db
def test_logins_failures_and_logouts_are_audited(member):
    assert _login("bob", "wrong").status_code == 200
    client = Client(REMOTE_ADDR=HERE)
    assert client.post("/accounts/login/", {"username": "bob", "password": "pw"}).status_code == 302
    assert client.post("/accounts/logout/").status_code == 302
    failed, = _entries("auth.login_failed")
    assert failed.after == {"username": "bob", "address": HERE} and failed.actor is None
    login, = _entries("auth.login")
    assert login.actor == member and login.after == {"address": HERE}
    logout, = _entries("auth.logout")
    assert logout.actor == member
    assert not any("wrong" in str(e.after) for e in AuditLog.objects.all())  # never a password


def test_lock_grows_from_the_fourth_failure_and_is_capped():
    delays = [authentication.lock_seconds(n) for n in range(1, 8)]
    assert delays == [0, 0, 0, 2, 4, 8, 16]
    assert authentication.lock_seconds(40) == authentication.MAX_DELAY_S


@pytest.mark.django_db
def test_repeated_failures_lock_out_that_username_from_that_address_only(member, make_user, monkeypatch):
    for _ in range(authentication.FREE_FAILURES):
        response = _login("bob", "wrong")
        assert "Please try again." in response.content.decode() and "Too many" not in response.content.decode()
    _login("bob", "wrong")  # the fourth: locked out for 2 s
    response = _login("bob", "pw")  # even the right password is not checked meanwhile
    assert response.status_code == 200
    assert re.search(r"Too many failed logins for this username from your address\. Try again in [12] seconds\.",
                     response.content.decode())
    throttled, = _entries("auth.login_throttled")
    assert throttled.after == {"username": "bob", "address": HERE}
    assert _login("bob", "pw", address=ELSEWHERE).status_code == 302  # another address is not slowed
    make_user("carol")
    assert _login("carol", "pw").status_code == 302  # nor another username from this address
    # The admin site's login counts the same way.
    assert "Too many failed logins" in _login("bob", "pw", path="/admin/login/").content.decode()

    real_monotonic = authentication.time.monotonic
    monkeypatch.setattr(authentication.time, "monotonic", lambda: real_monotonic() + 3)  # the lock is over
    assert _login("bob", "pw").status_code == 302
    assert authentication.retry_after("bob", HERE) == 0
    assert _login("bob", "wrong").status_code == 200  # a success cleared the count: free again
    assert authentication.retry_after("bob", HERE) == 0


@pytest.mark.django_db
def test_the_counts_are_shared_through_redis(settings):
    redis = pytest.importorskip("redis")
    url = "redis://127.0.0.1:6379/0"
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    except redis.RedisError:
        pytest.skip("no Redis on 127.0.0.1:6379")
    settings.PAGODA_REDIS_URL = url
    name = f"tester-{secrets.token_hex(4)}"
    try:
        waits = [authentication.record_failure(name, HERE) for _ in range(5)]
        assert waits == [0, 0, 0, 2, 4]
        assert 3 < authentication._RedisCounts(url).retry_after(authentication._pair_key(name, HERE)) <= 4
        assert not authentication._memory._pairs  # counted in Redis, not here
    finally:
        authentication.clear(name, HERE)
    assert authentication.retry_after(name, HERE) == 0


@pytest.mark.django_db
def test_account_changes_are_audited_with_the_admin_as_actor(superuser, member):
    admin = Client()
    admin.force_login(superuser)
    bob = Client()
    bob.force_login(member)
    response = admin.post("/admin/auth/user/", {"action": "deactivate_users", "_selected_action": [member.pk]})
    assert response.status_code == 302
    deactivated, = _entries("user.deactivate")
    assert deactivated.actor == superuser and deactivated.object_id == str(member.pk)
    assert deactivated.after == {"num_sessions_ended": 1}
    assert not Session.objects.filter(session_key=bob.cookies["sessionid"].value).exists()

    response = admin.post(f"/admin/auth/user/{member.pk}/password/",
                          {"password1": "Another pass phrase 9", "password2": "Another pass phrase 9",
                           "usable_password": "true"})
    assert response.status_code == 302
    changed, = _entries("user.password_change")
    assert changed.actor == superuser and changed.before is None and changed.after is None

    member.refresh_from_db()
    member.is_staff = True
    member.is_active = True
    member.save()  # a script: no actor
    activated, = _entries("user.activate")
    update, = _entries("user.update")
    assert activated.actor is None and update.before == {"is_staff": False, "is_superuser": False}
    assert update.after == {"is_staff": True, "is_superuser": False}

    response = admin.post(f"/admin/auth/user/{member.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    deleted, = _entries("user.delete")
    assert deleted.actor == superuser and deleted.before["username"] == "bob"


@pytest.mark.django_db
def test_new_users_are_audited(make_user):
    make_user("dora")
    created, = _entries("user.create")
    assert created.object_repr == "dora" and created.after["is_active"] is True
    assert "password" not in created.after


@pytest.mark.django_db
def test_an_admin_cannot_deactivate_themselves_by_the_action(superuser):
    admin = Client()
    admin.force_login(superuser)
    admin.post("/admin/auth/user/", {"action": "deactivate_users", "_selected_action": [superuser.pk]})
    superuser.refresh_from_db()
    assert superuser.is_active and not _entries("user.deactivate")
