"""Fixtures for the single sign-on tests: real slapd and OpenID provider processes (tests/sso/servers.py),
one of each per session, and Pagoda's settings made from the environment variables an IT team sets
(sso.environment), as pagoda.settings makes them."""
import pytest

from sso_servers import free_port, slapd_missing, start_provider, start_slapd, stop
from sso import environment as sso_env
from tenants import services
from tenants.models import Tenant

PAGODA_BROWSER_PORT = free_port()  # the browser test's Pagoda server: its callback is registered up front


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PAGODA_ENGINE = "off"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session")
def slapd(tmp_path_factory):
    reason = slapd_missing()
    if reason:
        pytest.skip(reason)
    server = start_slapd(tmp_path_factory.mktemp("slapd"))
    yield server
    stop(server.process)


@pytest.fixture(scope="session")
def provider(tmp_path_factory):
    pytest.importorskip("oauth2_provider", reason="django-oauth-toolkit is not installed (requirements-dev.txt)")
    server = start_provider(tmp_path_factory.mktemp("provider"), [
        "http://testserver/sso/oidc/callback/", f"http://127.0.0.1:{PAGODA_BROWSER_PORT}/sso/oidc/callback/"])
    yield server
    stop(server.process)


def configure(settings, *, oidc_env=None, ldap_env=None, password_login=True) -> None:
    """Apply the single sign-on environment to the test's settings, as pagoda.settings does."""
    values = {**sso_env.oidc_settings(oidc_env or {}), **sso_env.ldap_settings(ldap_env or {})}
    for name, value in values.items():
        setattr(settings, name, value)
    settings.PAGODA_PASSWORD_LOGIN = password_login
    settings.PAGODA_OIDC_BUTTON_LABEL = values.get("PAGODA_OIDC_BUTTON_LABEL", "single sign-on")
    settings.AUTHENTICATION_BACKENDS = sso_env.authentication_backends(
        oidc=values["PAGODA_OIDC_ENABLED"], ldap=values["PAGODA_LDAP_ENABLED"], password_login=password_login)


@pytest.fixture
def tenants(db) -> dict[str, Tenant]:
    return {slug: services.create_tenant(name=slug.title(), slug=slug) for slug in ("acme", "globex", "initech")}
