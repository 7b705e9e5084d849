"""tenants.pin_events: announcements over the real Redis, the listener's life (joining, an outage of its
Redis and the way back, stopping), and what an announcement does to this process's engine."""
from __future__ import annotations

import re
import shutil
import subprocess
import time
import uuid

import pytest
from asgiref.sync import async_to_sync
from channels_redis.core import RedisChannelLayer

from engine_runtime import runtime
from replica_cluster import free_port, redis_url, wait_until
from tenants import pin_events, services
from tenants.models import SystemPrompt


def _redis_reachable() -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(redis_url(), socket_connect_timeout=2).ping())
    except Exception:
        return False


needs_redis = pytest.mark.skipif(not _redis_reachable(), reason=f"needs Redis at {redis_url()}")


def _group() -> str:
    return f"pagoda.pins.test{uuid.uuid4().hex[:12]}"  # never the group of a real installation


def _announcement(**fields) -> dict:
    return {"type": pin_events.MESSAGE_TYPE, "tenant_id": 1, "pin_key": "tenant:acme", "origin": "elsewhere",
            **fields}


class Recorder:
    """An `apply` for PinListener that keeps what it was given."""

    def __init__(self):
        self.messages: list[dict] = []

    def __call__(self, message: dict) -> bool:
        self.messages.append(message)
        return True


@pytest.fixture
def listen():
    """listen(layer, group) -> (a started PinListener recording its messages, its Recorder); stopped after."""
    started = []

    def start(layer, group):
        recorder = Recorder()
        listener = pin_events.PinListener(layer=layer, group=group, apply=recorder, on_join=lambda: None)
        listener.start()
        started.append(listener)
        return listener, recorder

    yield start
    for listener in started:
        listener.stop()


def test_the_group_names_the_database():
    db = {"ENGINE": "django.db.backends.postgresql", "HOST": "db1", "PORT": "5432", "NAME": "pagoda"}
    group = pin_events.pin_group(db)
    assert re.fullmatch(r"pagoda\.pins\.[0-9a-f]{12}", group)
    assert pin_events.pin_group(dict(db)) == group
    assert pin_events.pin_group({**db, "NAME": "pagoda_staging"}) != group
    assert pin_events.pin_group({**db, "HOST": "db2"}) != group


def test_without_a_shared_layer_nothing_is_announced_or_heard():
    assert pin_events.announce(1, "tenant:acme") is False  # the in-memory layer: one process
    assert pin_events.start_listener() is None


@needs_redis
def test_the_listener_hears_another_process_announce(listen):
    group = _group()
    listener, recorder = listen(RedisChannelLayer(hosts=[redis_url()]), group)
    assert listener.joined.wait(10)
    other_replica = RedisChannelLayer(hosts=[redis_url()])  # its own connections, as another process has
    async_to_sync(other_replica.group_send)(group, _announcement(tenant_id=7))
    wait_until(lambda: listener.num_applied, 10, what="the announcement applied")
    assert recorder.messages == [_announcement(tenant_id=7)]
    assert (listener.num_received, listener.num_applied, listener.num_joins) == (1, 1, 1)
    listener.stop(timeout=20)  # a loaded machine: the suite's engines share the two cores
    assert not listener._thread.is_alive() and not listener.joined.is_set()


@needs_redis
def test_announce_sends_through_the_settings_layer(settings, listen, monkeypatch):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": [redis_url()]}}}
    group = _group()
    monkeypatch.setattr(pin_events, "pin_group", lambda db=None: group)
    listener, recorder = listen(RedisChannelLayer(hosts=[redis_url()]), group)
    assert listener.joined.wait(10)
    assert pin_events.announce(5, "tenant:globex") is True
    wait_until(lambda: recorder.messages, 10, what="the announcement received")
    assert recorder.messages == [_announcement(tenant_id=5, pin_key="tenant:globex", origin=pin_events.ORIGIN)]


def test_announce_never_raises_when_redis_is_unreachable(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": [f"redis://127.0.0.1:{free_port()}/0"]}}}
    started = time.monotonic()
    assert pin_events.announce(1, "tenant:acme") is False
    assert time.monotonic() - started < pin_events.SEND_TIMEOUT_S + 2


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
def test_the_listener_comes_back_after_its_redis_restarts(tmp_path, listen):
    port = free_port()
    command = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
               "--dir", str(tmp_path)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_until(lambda: _redis_ready(url), 10, what="the private redis-server up")
        group = _group()
        listener, recorder = listen(RedisChannelLayer(hosts=[url]), group)
        assert listener.joined.wait(10)
        server.terminate()
        server.wait(10)
        wait_until(lambda: not listener.joined.is_set(), 20, what="the listener noticing the outage")
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL)  # an empty Redis: the group is gone
        wait_until(lambda: listener.num_joins == 2 and listener.joined.is_set(), 40, what="the listener rejoined")
        async_to_sync(RedisChannelLayer(hosts=[url]).group_send)(group, _announcement())
        wait_until(lambda: recorder.messages, 10, what="an announcement after the restart")
    finally:
        server.terminate()
        server.wait(10)


def _redis_ready(url: str) -> bool:
    import redis

    return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())


def test_a_stopped_listener_never_joined_stops_at_once(listen):
    listener, _ = listen(RedisChannelLayer(hosts=[f"redis://127.0.0.1:{free_port()}/0"]), _group())
    time.sleep(0.5)  # refused, waiting to try again
    assert not listener.joined.is_set()
    listener.stop(timeout=20)
    assert not listener._thread.is_alive()


# --- applying an announcement to this process's engine ---
def _change_prompt_behind_our_back(tenant, text: str) -> SystemPrompt:
    """What another replica's commit looks like from here: the database changed, no on_commit ran here."""
    SystemPrompt.objects.filter(tenant=tenant).update(is_active=False)
    version = SystemPrompt.objects.filter(tenant=tenant).count() + 1
    return SystemPrompt.objects.create(tenant=tenant, version=version, text=text, is_active=True)


@pytest.mark.django_db(transaction=True)  # the pins follow commits
def test_an_announcement_repins_what_changed_once(fake_engine):
    tenant = services.create_tenant(name="Acme", slug="acme")
    services.create_system_prompt(tenant, "one two three " * 10)  # pinned here at commit
    assert fake_engine.pins()["tenant:acme"].num_prompt_tokens == 33 and fake_engine.num_pin_calls == 1

    _change_prompt_behind_our_back(tenant, "four five " * 30)
    message = _announcement(tenant_id=tenant.pk, pin_key=tenant.pin_key)
    assert pin_events.apply_message(message) is True
    assert fake_engine.pins()["tenant:acme"].num_prompt_tokens == 63 and fake_engine.num_pin_calls == 2
    assert pin_events.apply_message(message) is True  # again (the watcher got there first): no new prefill
    assert fake_engine.num_pin_calls == 2

    _change_prompt_behind_our_back(tenant, "six " * 50)
    assert pin_events.apply_message({**message, "origin": pin_events.ORIGIN}) is False  # ours: applied already
    assert pin_events.apply_message({**message, "type": "chat.message"}) is False
    assert pin_events.apply_message({**message, "pin_key": "acme"}) is False  # not a tenant pin key
    assert fake_engine.pins()["tenant:acme"].num_prompt_tokens == 63


@pytest.mark.django_db(transaction=True)
def test_an_announcement_of_a_deleted_tenant_unpins_it(fake_engine):
    tenant = services.create_tenant(name="Acme", slug="acme")
    services.create_system_prompt(tenant, "hello " * 20)
    tenant_id = tenant.pk
    tenant.delete()  # deleted elsewhere: this process still holds the pin
    assert "tenant:acme" in fake_engine.pins()
    assert pin_events.apply_message(_announcement(tenant_id=tenant_id, pin_key="tenant:acme")) is True
    assert fake_engine.pins() == {}


@pytest.mark.django_db(transaction=True)
def test_catch_up_reconciles_everything_missed(fake_engine):
    tenant = services.create_tenant(name="Acme", slug="acme")
    _change_prompt_behind_our_back(tenant, "missed while Redis was down " * 3)
    assert fake_engine.pins() == {}
    pin_events.catch_up()
    assert set(fake_engine.pins()) == {"tenant:acme"}


def test_no_engine_nothing_to_apply(monkeypatch):
    monkeypatch.setattr(runtime, "_engine", None)  # even when the session's real engine is loaded
    monkeypatch.setattr(runtime, "_state", "stopped")
    assert pin_events.apply_message(_announcement()) is False
