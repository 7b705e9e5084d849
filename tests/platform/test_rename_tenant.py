"""Fixing a slug typed wrong at creation (manage.py rename_tenant, the admin): what is keyed by the slug
follows (console URLs, the engine's pin and prefix-cache key, `owned_by`), what is keyed by the id
stays, the old console URL is a 404, and the rename is audited."""
import pytest
from chat import history
from django.core.management import CommandError, call_command
from django.test import Client

import engine_runtime
from api import auth as api_auth
from api import services as api_services
from tenants import pinning, services
from tenants.models import AuditLog, Tenant

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_renaming_moves_the_console_and_keeps_what_hangs_on_the_id(tenant, tenant_admin, member, superuser):
    conversation = history.create_conversation(tenant, member)
    key, plaintext = api_services.create_api_key(tenant, "tool")
    services.rename_tenant(tenant, "acme-corp", actor=superuser)
    tenant.refresh_from_db()
    assert tenant.slug == "acme-corp" and tenant.engine_key == "acme-corp" and tenant.pin_key == "tenant:acme-corp"
    client = _client(tenant_admin)
    assert client.get("/console/acme/").status_code == 404
    assert client.get("/console/acme/people/").status_code == 404
    assert client.get("/console/acme-corp/").status_code == 200
    assert set(tenant.memberships.values_list("user__username", flat=True)) == {"ann", "bob"}
    assert conversation.__class__.objects.get(pk=conversation.pk).tenant_id == tenant.pk
    loaded = api_auth._load_key(api_services.hash_api_key(plaintext))  # what authenticate_key reads (it is async)
    assert loaded[0].tenant.slug == "acme-corp" and api_auth._refusal(*loaded) is None  # made before: still works
    entry = AuditLog.objects.get(action="tenant.rename")
    assert (entry.before, entry.after, entry.actor, entry.tenant_id) == (
        {"slug": "acme"}, {"slug": "acme-corp"}, superuser, tenant.pk)


def test_a_bad_or_taken_slug_is_refused(tenant, other_tenant):
    from django.core.exceptions import ValidationError

    for slug in ("globex", "not a slug", "", "acme"):
        with pytest.raises(ValidationError):
            services.rename_tenant(tenant, slug)
    assert Tenant.objects.get(pk=tenant.pk).slug == "acme" and not AuditLog.objects.filter(action="tenant.rename")


def test_the_command_renames_and_explains_refusals(tenant, other_tenant, capsys):
    call_command("rename_tenant", "acme", "acme-corp")
    assert "/console/acme-corp/" in capsys.readouterr().out
    assert Tenant.objects.filter(slug="acme-corp").exists()
    with pytest.raises(CommandError, match="no tenant with slug 'acme'"):
        call_command("rename_tenant", "acme", "acme-2")
    with pytest.raises(CommandError, match="slug"):
        call_command("rename_tenant", "acme-corp", "globex")


def test_the_pin_moves_to_the_new_key(fake_engine_factory, tenant, other_tenant, django_capture_on_commit_callbacks):
    engine = engine_runtime.get_engine()
    with django_capture_on_commit_callbacks(execute=True):
        services.create_system_prompt(tenant, "be kind")
        services.create_system_prompt(other_tenant, "be brief")
    assert set(engine.pins()) == {"tenant:acme", "tenant:globex"}
    with django_capture_on_commit_callbacks(execute=True):
        services.rename_tenant(tenant, "acme-corp")
    assert set(engine.pins()) == {"tenant:acme-corp", "tenant:globex"}
    assert engine.pins()["tenant:acme-corp"].num_prompt_tokens == 5
    # another replica still holding the old pin hears the announcement (pin_events.apply_message)
    engine.pin_prefix("tenant:acme", [1, 2, 3])
    pinning.sync_key(tenant.pk, "tenant:acme", engine, only_if_changed=True)
    assert set(engine.pins()) == {"tenant:acme-corp", "tenant:globex"}


def test_superusers_rename_in_the_admin_and_tenant_admins_cannot(tenant, tenant_admin, superuser):
    form = {"name": "Acme", "slug": "acme-corp", "is_active": "on"}
    assert _client(superuser).post(f"/admin/tenants/tenant/{tenant.pk}/change/", form).status_code == 302
    assert Tenant.objects.get(pk=tenant.pk).slug == "acme-corp"
    assert AuditLog.objects.get(action="tenant.rename").actor == superuser
    page = _client(tenant_admin).get(f"/admin/tenants/tenant/{tenant.pk}/change/").content.decode()
    assert 'name="slug"' not in page
    _client(tenant_admin).post(f"/admin/tenants/tenant/{tenant.pk}/change/", {**form, "name": "Acme", "slug": "x"})
    assert Tenant.objects.get(pk=tenant.pk).slug == "acme-corp"
