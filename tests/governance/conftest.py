"""Fixtures of the governance tests: tenants, members and finished chat turns, no engine (the live
tests in test_budgets_live.py start their own servers)."""
import pytest

from tenants import services
from tenants.models import Membership


@pytest.fixture(autouse=True)
def _no_engine(settings):
    settings.PAGODA_ENGINE = "off"
    settings.PAGODA_PIN_SYNC_SECONDS = 0
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "pagoda.channel_layer.InMemoryChannelLayer"}}
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def tenant(db):
    tenant = services.create_tenant(name="Acme", slug="acme")
    return tenant


@pytest.fixture
def other_tenant(db):
    return services.create_tenant(name="Globex", slug="globex")


@pytest.fixture
def make_member(django_user_model):
    def make(tenant, username: str, role=Membership.Role.MEMBER):
        user = django_user_model.objects.create_user(username=username, password="pw")
        services.add_member(tenant, user, role=role)
        return user

    return make
