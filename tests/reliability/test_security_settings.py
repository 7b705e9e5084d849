"""Security checks that need no server: CSRF on every form, the production settings (`check --deploy`
clean, secure cookies, HSTS), and a sweep of every URL that takes an id or a slug with another
tenant's objects. The live-server checks (socket origin, keys, prefix-cache timing) are in
test_security_live.py; the Markdown renderer's escaping is tests/chat/test_chat_markdown.py."""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from api import services as api_services
from api.models import ApiKey
from chat import history
from chat.models import Conversation
from tenants import services
from tenants.models import AuditLog, Membership, SamplingProfile, SystemPrompt

ROOT = Path(__file__).resolve().parents[2]


def _patterns(resolvers=None, prefix: str = ""):
    """(route, callback) of every URL pattern, included ones too."""
    for p in resolvers if resolvers is not None else get_resolver().url_patterns:
        if isinstance(p, URLResolver):
            yield from _patterns(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p.callback


def test_only_the_bearer_token_api_is_exempt_from_csrf():
    exempt = sorted(route for route, callback in _patterns() if getattr(callback, "csrf_exempt", False))
    # Cookies never authenticate the bearer-token API: /v1, and /tokenize and /detokenize at the root (vLLM's paths).
    assert exempt and all(route.startswith("v1/") or route in ("tokenize", "detokenize") for route in exempt), exempt


@pytest.fixture
def world(db, django_user_model):
    """Acme (ours: an admin, a member) and Globex (theirs), each with one of every tenant object."""
    objects = {}
    for slug in ("acme", "globex"):
        tenant = services.create_tenant(name=slug.title(), slug=slug)
        admin_user = django_user_model.objects.create_user(username=f"{slug}-admin", password="pw")
        member = django_user_model.objects.create_user(username=f"{slug}-member", password="pw")
        services.add_member(tenant, admin_user, role=Membership.Role.ADMIN)
        services.add_member(tenant, member, role=Membership.Role.MEMBER)
        services.create_system_prompt(tenant, f"{slug} secret prompt")
        key, _ = api_services.create_api_key(tenant, f"{slug} key")
        conversation = history.create_conversation(tenant, member)
        history.add_user_message(conversation, f"{slug} private question")
        api_services.record_api_usage(key, endpoint="models", status_code=200)
        objects[slug] = {"tenant": tenant, "admin": admin_user, "member": member, "conversation": conversation,
                         "key": key}
    return objects


FORM_POSTS = [
    lambda w: reverse("login"),
    lambda w: reverse("logout"),
    lambda w: reverse("set_language"),
    lambda w: reverse("chat:new"),
    lambda w: reverse("chat:delete", args=[w["acme"]["conversation"].pk]),
    lambda w: reverse("console:save_prompt", args=["acme"]),
    lambda w: reverse("console:activate_prompt", args=["acme", 1]),
    lambda w: reverse("console:deactivate_prompt", args=["acme"]),
    lambda w: reverse("admin:tenants_samplingprofile_add"),
    lambda w: reverse("admin:api_apikey_changelist"),  # bulk actions (revoke) post here
]


@pytest.mark.parametrize("url_of", FORM_POSTS)
def test_every_form_post_needs_the_csrf_token(world, url_of):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world["acme"]["admin"])
    response = client.post(url_of(world), {"text": "x", "name": "y", "language": "ko"})
    assert response.status_code == 403 and b"CSRF" in response.content


def test_the_login_form_works_with_its_token(world):
    client = Client(enforce_csrf_checks=True)
    page = client.get(reverse("login"))
    token = page.cookies["csrftoken"].value
    response = client.post(reverse("login"), {"username": "acme-member", "password": "pw",
                                              "csrfmiddlewaretoken": token})
    assert response.status_code == 302


# --- every URL with an id or a slug, pointed at the other tenant ---
def _foreign_urls(w) -> list[str]:
    theirs = w["globex"]
    urls = [
        reverse("chat:conversation", args=[theirs["conversation"].pk]),
        reverse("console:tenant", args=["globex"]),
        reverse("console:tenant_engine", args=["globex"]),
    ]
    for model, model_admin in admin.site._registry.items():
        meta = model._meta
        if meta.app_label != "tenants":
            continue
        owned = model.objects.filter(pk=theirs["tenant"].pk) if meta.model_name == "tenant" else \
            model.objects.filter(tenant=theirs["tenant"])
        for obj in owned[:3]:
            for action in ("change", "history", "delete"):
                urls.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_{action}", args=[obj.pk]))
    return urls


FOREIGN_POSTS = [
    lambda w: (reverse("chat:delete", args=[w["globex"]["conversation"].pk]), {}),
    lambda w: (reverse("console:save_prompt", args=["globex"]), {"text": "pwned", "note": ""}),
    lambda w: (reverse("console:activate_prompt", args=["globex", 1]), {}),
    lambda w: (reverse("console:deactivate_prompt", args=["globex"]), {}),
    lambda w: (reverse("chat:new"), {"tenant": "globex"}),
    lambda w: (reverse("admin:api_apikey_changelist"),
               {"action": "revoke_selected", "_selected_action": [w["globex"]["key"].pk]}),
    lambda w: (reverse("admin:api_apikey_changelist"),
               {"action": "delete_selected", "_selected_action": [w["globex"]["key"].pk], "post": "yes"}),
]


def _their_state(w) -> dict:
    tenant = w["globex"]["tenant"]
    return {
        "prompts": list(SystemPrompt.objects.filter(tenant=tenant).values_list("text", "is_active")),
        "keys": list(ApiKey.objects.filter(tenant=tenant).values_list("pk", "revoked_at")),
        "conversations": list(Conversation.objects.filter(tenant=tenant).values_list("pk", flat=True)),
        "profiles": SamplingProfile.objects.filter(tenant=tenant).count(),
        "audit": AuditLog.objects.filter(tenant=tenant).count(),
    }


@pytest.mark.parametrize("who", ["admin", "member"])
def test_no_url_opens_or_changes_another_tenants_objects(world, who):
    client = Client()
    client.force_login(world["acme"][who])
    before = _their_state(world)
    urls = _foreign_urls(world)
    assert len(urls) > 20  # the sweep reached every tenant model
    for url in urls:
        response = client.get(url)
        body = response.content.decode(errors="replace")
        assert response.status_code in (302, 403, 404), (url, response.status_code)
        assert "globex" not in body.lower() or response.status_code != 200, url
    for post in FOREIGN_POSTS:
        url, data = post(world)
        response = client.post(url, data)
        assert response.status_code in (302, 403, 404), (url, response.status_code)
    after = _their_state(world)
    # chat:new with tenant=globex opens a chat in the user's own tenant (the form's fallback), never theirs
    assert after == before
    assert not Conversation.objects.filter(tenant=world["globex"]["tenant"], user=world["acme"][who]).exists()


def test_the_sweep_is_not_vacuous_for_own_objects(world):
    client = Client()
    client.force_login(world["acme"]["admin"])
    own = world["acme"]["tenant"]
    assert client.get(reverse("console:tenant", args=["acme"])).status_code == 200
    key = ApiKey.objects.filter(tenant=own).first()
    assert client.get(reverse("admin:api_apikey_change", args=[key.pk])).status_code == 200


# --- production settings ---
def _production_settings(extra: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAGODA_", "DJANGO_", "DATABASE_URL"))}
    env.update({"DEBUG": "false", "SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": "chat.example.com",
                "PAGODA_BEHIND_HTTPS_PROXY": "true", "PAGODA_ENGINE": "off", "PAGODA_VAR_DIR": "/tmp/pagoda-deploy-check",
                "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT)]), **(extra or {})})
    check = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], env=env,
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    names = ["DEBUG", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SESSION_COOKIE_HTTPONLY", "SESSION_COOKIE_SAMESITE",
             "CSRF_COOKIE_SAMESITE", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "SECURE_PROXY_SSL_HEADER",
             "SECURE_CONTENT_TYPE_NOSNIFF", "X_FRAME_OPTIONS", "SECURE_REDIRECT_EXEMPT"]
    script = ("import django, json; django.setup(); from django.conf import settings as s; "
              f"print(json.dumps({{n: getattr(s, n) for n in {names!r}}}))")
    values = subprocess.run([sys.executable, "-c", script], env={**env, "DJANGO_SETTINGS_MODULE": "pagoda.settings"},
                            cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    return check, json.loads(values.stdout.strip().splitlines()[-1])


def test_check_deploy_is_clean_with_production_settings():
    check, values = _production_settings()
    assert check.returncode == 0, check.stdout + check.stderr
    assert "no issues" in check.stdout
    assert values["DEBUG"] is False and values["SESSION_COOKIE_SECURE"] and values["CSRF_COOKIE_SECURE"]
    assert values["SESSION_COOKIE_HTTPONLY"] and values["SESSION_COOKIE_SAMESITE"] == "Lax"
    assert values["SECURE_SSL_REDIRECT"] and values["SECURE_HSTS_SECONDS"] >= 31536000
    assert values["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert values["SECURE_CONTENT_TYPE_NOSNIFF"] and values["X_FRAME_OPTIONS"] == "DENY"
    assert values["SECURE_REDIRECT_EXEMPT"] == ["^health$", "^metrics$"]  # probes come over plain HTTP


def test_check_deploy_flags_debug_and_a_weak_key():
    check, _ = _production_settings({"DEBUG": "true", "SECRET_KEY": "short"})
    assert check.returncode != 0 and "security.W018" in check.stderr + check.stdout
    assert "security.W009" in check.stderr + check.stdout


def _env_example_web_settings() -> dict[str, str]:
    """The HTTPS settings deploy/env.example ships (DEBUG, ALLOWED_HOSTS, PAGODA_SSL_* / PAGODA_HSTS_*)."""
    lines = (ROOT / "deploy/env.example").read_text().splitlines()
    values = dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
    return {k: v for k, v in values.items() if k in ("DEBUG", "ALLOWED_HOSTS") or k.startswith(("PAGODA_SSL_",
                                                                                              "PAGODA_HSTS_"))}


def test_the_env_example_behind_https_is_clean_for_check_deploy():
    web = _env_example_web_settings()
    assert set(web) >= {"PAGODA_SSL_REDIRECT", "PAGODA_HSTS_SECONDS", "PAGODA_HSTS_INCLUDE_SUBDOMAINS"}
    check, values = _production_settings({**web, "PAGODA_BEHIND_HTTPS_PROXY": "true"})
    assert check.returncode == 0 and "no issues" in check.stdout, check.stdout + check.stderr
    assert values["SECURE_SSL_REDIRECT"] and values["SECURE_HSTS_SECONDS"] == int(web["PAGODA_HSTS_SECONDS"])


# What the env example's comments promise: each of these makes check --deploy warn.
WEAKER = [
    ({"PAGODA_HSTS_INCLUDE_SUBDOMAINS": "false"}, ["W005"]),
    ({"PAGODA_HSTS_SECONDS": "0"}, ["W004"]),
    ({"PAGODA_SSL_REDIRECT": "false"}, ["W008"]),
    # Without the proxy the PAGODA_SSL_* / PAGODA_HSTS_* values are not read at all.
    ({"PAGODA_BEHIND_HTTPS_PROXY": "false", "PAGODA_SSL_REDIRECT": "true", "PAGODA_HSTS_SECONDS": "31536000"},
     ["W004", "W008", "W012", "W016"]),
]


@pytest.mark.parametrize(("extra", "warnings"), WEAKER)
def test_weaker_https_settings_make_check_deploy_warn(extra, warnings):
    check, values = _production_settings(extra)
    output = check.stdout + check.stderr
    assert check.returncode != 0 and all(f"security.{w}" in output for w in warnings), output
    if extra.get("PAGODA_BEHIND_HTTPS_PROXY") == "false":
        assert values["SECURE_HSTS_SECONDS"] == 0 and not values["SECURE_SSL_REDIRECT"]
        assert not values["SESSION_COOKIE_SECURE"] and not values["CSRF_COOKIE_SECURE"]
