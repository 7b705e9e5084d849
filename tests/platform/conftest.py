"""Fixtures for the platform tests.

By default no engine runs (PAGODA_ENGINE=off, no pin watcher, the in-memory channel layer). Tests that
need the real engine take the `engine` fixture: the model loads once per session and is skipped where
`inference.AsyncLLM` is missing; after each test its tenant pins are dropped.
"""
import contextlib

import pytest

from engine_runtime import runtime
from runtime_testing import engine, real_engine, runtime_set_aside  # noqa: F401 (fixtures)
from tenants import pinning, services
from tenants.models import Membership


@pytest.fixture(autouse=True)
def _engine_off(settings):
    settings.PAGODA_ENGINE = "off"
    settings.PAGODA_PIN_SYNC_SECONDS = 0
    # Pin announcements stay in this process, even when the run has REDIS_URL (tests/deploy use Redis).
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "pagoda.channel_layer.InMemoryChannelLayer"}}
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast tests only


@pytest.fixture
def tenant(db):
    return services.create_tenant(name="Acme", slug="acme")


@pytest.fixture
def other_tenant(db):
    return services.create_tenant(name="Globex", slug="globex")


@pytest.fixture
def make_user(django_user_model):
    def make(username: str, **extra):
        return django_user_model.objects.create_user(username=username, password="pw", **extra)

    return make


@pytest.fixture
def tenant_admin(tenant, make_user):
    user = make_user("ann")
    services.add_member(tenant, user, role=Membership.Role.ADMIN)
    return user


@pytest.fixture
def member(tenant, make_user):
    user = make_user("bob")
    services.add_member(tenant, user, role=Membership.Role.MEMBER)
    return user


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser(username="root", password="pw")


class FakePin:
    def __init__(self, key: str, token_ids: list[int]):
        self.key, self.num_prompt_tokens = key, len(token_ids)
        self.num_tokens = len(token_ids) // 16 * 16
        self.num_blocks = len(token_ids) // 16


class FakeEngine:
    """Enough of AsyncLLM's surface for the start-up path, without loading a model (1 token per word)."""

    model_name = "fake"
    max_model_len = 64

    def __init__(self):
        self.pinned: dict[str, FakePin] = {}
        self.alive = True
        self.error = None
        self.num_shutdowns = 0

    def encode_system_prefix(self, text: str) -> list[int]:
        return list(range(len(text.split()) + 3))

    def pin_prefix(self, key, prompt, tenant=None):
        self.pinned[key] = FakePin(key, prompt)
        return self.pinned[key]

    def unpin_prefix(self, key):
        return self.pinned.pop(key, None) is not None

    def pins(self):
        return dict(self.pinned)

    def stats(self):
        return {"num_running": 0, "num_waiting": 0, "num_blocks_total": 10, "num_blocks_used": 1, "per_tenant": {}}

    def is_alive(self):
        return self.alive

    def shutdown(self):
        self.alive = False
        self.num_shutdowns += 1


@contextlib.contextmanager
def _runtime_set_aside():
    """runtime_set_aside(), and the pin bookkeeping of the fake engines used inside forgotten after."""
    try:
        with runtime_set_aside():
            yield
    finally:
        pinning._pinned_versions.clear()
        pinning._pin_errors.clear()


@pytest.fixture
def no_engine():
    """No engine running, even if the session's real engine is loaded."""
    with _runtime_set_aside():
        yield


@pytest.fixture
def fake_engine_factory(monkeypatch, settings):
    """Replace the engine constructor with one that counts builds (PAGODA_ENGINE=lazy); returns the builds."""
    built: list[FakeEngine] = []

    def build():
        built.append(FakeEngine())
        return built[-1]

    monkeypatch.setattr(runtime, "_build_engine", build)
    settings.PAGODA_ENGINE = "lazy"
    with _runtime_set_aside():
        yield built
