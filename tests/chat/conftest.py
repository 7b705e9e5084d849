"""Fixtures for the chat tests.

No engine runs unless a test takes `engine`: the real engine through engine_runtime (the default
SmolLM2 on the CPU, as the server builds it), loaded once per session and shared with the platform
and observability tests when they run in the same session. Socket tests use the real ASGI stack
(chat_testing.chat_socket) and a transactional database, since the consumer's queries run in
another thread than the test's.
"""
import pytest
from django.test import Client

from runtime_testing import engine, real_engine  # noqa: F401 (fixtures)
from chat import history
from tenants import services
from tenants.models import Membership, SamplingProfile


@pytest.fixture(autouse=True)
def _chat_settings(settings):
    settings.PAGODA_ENGINE = "off"
    settings.PAGODA_PIN_SYNC_SECONDS = 0
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast tests only
    settings.PAGODA_CHAT_MAX_MESSAGE_CHARS = 8000
    settings.PAGODA_CHAT_ENGINE_WAIT_SECONDS = 30
    settings.LANGUAGE_CODE = "en"


@pytest.fixture
def tenant(db):
    # Its own slug: the engine's prefix cache is per tenant, so what these tests leave cached never
    # turns into surprise prefix hits for other suites' tenants (the observability tests count them).
    tenant = services.create_tenant(name="Acme", slug="chat-acme")
    # Short, deterministic replies by default; `long` replies for stopping mid-way.
    services.save_profile(SamplingProfile(tenant=tenant, name="quick", temperature=0.0, max_tokens=6, is_default=True))
    services.save_profile(SamplingProfile(tenant=tenant, name="long", temperature=0.8, max_tokens=48, ignore_eos=True,
                                          seed=1))
    return tenant


@pytest.fixture
def other_tenant(db):
    return services.create_tenant(name="Globex", slug="chat-globex")


@pytest.fixture
def make_user(django_user_model):
    def make(username: str, tenant=None):
        user = django_user_model.objects.create_user(username=username, password="pw")
        if tenant is not None:
            services.add_member(tenant, user, role=Membership.Role.MEMBER)
        return user

    return make


@pytest.fixture
def member(tenant, make_user):
    return make_user("mina", tenant)


@pytest.fixture
def conversation(tenant, member):
    return history.create_conversation(tenant, member)


@pytest.fixture
def session_key():
    """session_key(user) -> the id of a logged-in session of that user (the cookie a browser sends)."""

    def login(user) -> str:
        client = Client()
        client.force_login(user)
        return client.cookies["sessionid"].value

    return login
