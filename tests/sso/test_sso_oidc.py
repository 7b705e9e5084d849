"""OpenID Connect sign-on against a real provider process (tests/sso/provider: django-oauth-toolkit,
PKCE required): the redirect flow, driven here with Django's test client for Pagoda and an HTTP
session for the provider's login; users made at the first login and found again by subject; the
groups claim mapped and withdrawn across logins; bad tokens, a replayed state and a deactivated
account refused on a clear page, never a 500. The same flow in Chromium: test_sso_browser.py."""
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth import get_user_model
from django.test import Client

from chat.access import session_user
from conftest import configure
from sso import services as sso_services
from sso.models import ExternalIdentity, GroupMapping, Source
from tenants.models import AuditLog, Membership


def provider_session(provider, username: str) -> requests.Session:
    """A browser-like session logged in at the provider."""
    session = requests.Session()
    session.get(provider.url + "/accounts/login/", timeout=10)
    response = session.post(provider.url + "/accounts/login/", timeout=10, allow_redirects=False, data={
        "username": username, "password": f"{username}-pw", "csrfmiddlewaretoken": session.cookies["provider_csrf"],
        "next": "/o/userinfo/"}, headers={"Referer": provider.url + "/accounts/login/"})
    assert response.status_code == 302, response.text[:500]
    return session


def start(client: Client, at_provider: requests.Session) -> str:
    """Pagoda's login redirect, followed at the provider: the callback URL (path and query) it sends back."""
    response = client.get("/sso/oidc/login/")
    assert response.status_code == 302
    authorize = urlsplit(response["Location"])
    params = parse_qs(authorize.query)
    assert params["code_challenge_method"] == ["S256"] and len(params["code_challenge"][0]) >= 43  # PKCE
    assert params["nonce"] and params["state"]
    back = at_provider.get(response["Location"], allow_redirects=False, timeout=10)
    assert back.status_code == 302, back.text[:500]
    callback = urlsplit(back.headers["Location"])
    assert callback.path == "/sso/oidc/callback/" and "code=" in callback.query
    return f"{callback.path}?{callback.query}"


def sso_login(client: Client, provider, username: str):
    return client.get(start(client, provider_session(provider, username)))


@pytest.fixture
def oidc(settings, provider):
    configure(settings, oidc_env=provider.environment())
    return provider


@pytest.fixture
def mappings(tenants):
    for group, slug, role in (("pagoda-sales", "acme", "member"), ("pagoda-admins", "acme", "admin"),
                              ("pagoda-support", "globex", "member")):
        sso_services.save_mapping(GroupMapping(source=Source.OIDC, group=group, tenant=tenants[slug], role=role))


def set_groups(provider, username: str, groups: list[str]) -> None:
    provider.shell(f"""
from django.contrib.auth.models import Group, User
user = User.objects.get(username={username!r})
user.groups.set([Group.objects.get_or_create(name=n)[0] for n in {groups!r}])
""")


def roles(user) -> dict[str, str]:
    return dict(Membership.objects.filter(user=user).values_list("tenant__slug", "role"))


def test_login_page_offers_the_provider(oidc, db):
    page = Client().get("/accounts/login/").content.decode()
    assert "Sign in with Test IdP" in page and "/sso/oidc/login/" in page


def test_code_flow_creates_the_user_and_maps_groups_then_withdraws(oidc, mappings, tenants):
    client = Client()
    response = sso_login(client, oidc, "carol")
    assert response.status_code == 302 and response["Location"] == "/"
    carol = get_user_model().objects.get(username="carol")
    assert (carol.email, carol.first_name) == ("carol@example.test", "Carol")
    assert not carol.has_usable_password()
    assert ExternalIdentity.objects.get(user=carol).issuer == oidc.issuer
    assert roles(carol) == {"acme": "admin"}
    assert session_user(client.session.session_key) == carol
    assert AuditLog.objects.filter(action="sso.login", after__source="oidc").count() == 1

    set_groups(oidc, "carol", ["pagoda-support"])
    client = Client()
    assert sso_login(client, oidc, "carol").status_code == 302
    assert get_user_model().objects.filter(username__startswith="carol").count() == 1  # found by subject
    assert roles(carol) == {"globex": "member"}
    assert AuditLog.objects.filter(action="membership.delete", object_repr__contains="Acme").exists()
    set_groups(oidc, "carol", ["pagoda-sales", "pagoda-admins"])


def test_a_local_account_of_the_same_name_is_not_taken_over(oidc, mappings, django_user_model):
    local = django_user_model.objects.create_user("carol", password="local-pw")
    assert sso_login(Client(), oidc, "carol").status_code == 302
    identity = ExternalIdentity.objects.get()
    assert identity.user != local and identity.user.username == "carol-2"
    assert roles(local) == {}


@pytest.mark.parametrize("kind, reason, words", [
    ("wrong-key", "signature", "not signed by your organisation"),
    ("wrong-audience", "audience", "issued for another application"),
    ("expired", "expired", "has expired"),
])
def test_bad_id_tokens_are_refused_on_a_clear_page(settings, oidc, mappings, kind, reason, words):
    settings.OIDC_OP_TOKEN_ENDPOINT = f"{oidc.url}/bad/{kind}/token/"
    client = Client()
    response = sso_login(client, oidc, "carol")
    assert response.status_code == 403
    page = response.content.decode()
    assert f'data-sso-reason="{reason}"' in page and words in page
    assert "_auth_user_id" not in client.session
    assert not get_user_model().objects.filter(username="carol").exists()
    assert AuditLog.objects.get(action="sso.login_failed").after["reason"] == reason


def test_wrong_issuer_is_refused(settings, oidc, mappings):
    settings.PAGODA_OIDC_ISSUER = "https://login.example.com/another-tenant/v2.0"
    response = sso_login(Client(), oidc, "carol")
    assert response.status_code == 403 and b'data-sso-reason="issuer"' in response.content


def test_a_replayed_state_is_refused(oidc, mappings):
    client = Client()
    callback = start(client, provider_session(oidc, "carol"))
    assert client.get(callback).status_code == 302  # logged in
    again = client.get(callback)  # the same code and state, in the same browser
    assert again.status_code == 400 and b'data-sso-reason="state"' in again.content
    elsewhere = Client().get(callback)  # in a browser that never started this sign-in
    assert elsewhere.status_code == 400 and b'data-sso-reason="state"' in elsewhere.content


def test_a_state_from_another_sign_in_is_refused(oidc, mappings):
    client = Client()
    at_provider = provider_session(oidc, "carol")
    first = urlsplit(start(client, at_provider))
    second = urlsplit(start(client, at_provider))
    code = parse_qs(first.query)["code"][0]
    forged_state = parse_qs(second.query)["state"][0] + "x"
    response = client.get(f"/sso/oidc/callback/?code={code}&state={forged_state}")
    assert response.status_code == 400 and b'data-sso-reason="state"' in response.content


def test_a_used_code_is_refused_by_the_provider(oidc, mappings):
    client = Client()
    at_provider = provider_session(oidc, "carol")
    callback = start(client, at_provider)
    assert client.get(callback).status_code == 302
    code = parse_qs(urlsplit(callback).query)["code"][0]
    state = parse_qs(urlsplit(start(client, at_provider)).query)["state"][0]  # a fresh state, the old code
    response = client.get(f"/sso/oidc/callback/?code={code}&state={state}")
    assert response.status_code == 403 and b'data-sso-reason="code"' in response.content


def test_provider_errors_and_deactivated_accounts_are_refused(oidc, mappings):
    client = Client()
    client.get("/sso/oidc/login/")
    state = next(iter(client.session["oidc_states"]))
    response = client.get(f"/sso/oidc/callback/?error=access_denied&state={state}")
    assert response.status_code == 403 and b'data-sso-reason="provider"' in response.content

    assert sso_login(Client(), oidc, "dave").status_code == 302
    dave = get_user_model().objects.get(username="dave")
    dave.is_active = False
    dave.save()
    response = sso_login(Client(), oidc, "dave")
    assert response.status_code == 403 and b'data-sso-reason="deactivated"' in response.content


def test_deactivation_ends_an_sso_session(oidc, mappings):
    client = Client()
    sso_login(client, oidc, "dave")
    key = client.session.session_key
    dave = get_user_model().objects.get(username="dave")
    assert session_user(key) == dave
    dave.is_active = False
    dave.save()
    assert session_user(key) is None
    assert client.get("/chat/").status_code == 302  # back to the login page


def test_sso_pages_answer_404_when_not_set_up(db):
    response = Client().get("/sso/oidc/login/")
    assert response.status_code == 404 and b'data-sso-reason="disabled"' in response.content
