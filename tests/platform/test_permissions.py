"""Tenant admins see and change only their own tenant, in the admin site and in the console."""
import pytest
from django.urls import reverse

from console import panels
from tenants import selectors, services
from tenants.models import AuditLog, Membership, SamplingProfile, SystemPrompt


@pytest.fixture
def acme_admin_client(client, tenant, other_tenant, tenant_admin):
    services.create_system_prompt(tenant, "Acme prompt")
    services.create_system_prompt(other_tenant, "Globex secret prompt")
    client.force_login(tenant_admin)
    return client


def admin_url(model: str, action: str = "changelist", *args) -> str:
    return reverse(f"admin:tenants_{model}_{action}", args=args)


# --- admin site ---
def test_tenant_admin_enters_admin_and_sees_only_own_tenant(acme_admin_client, tenant, other_tenant):
    assert acme_admin_client.get(reverse("admin:index")).status_code == 200
    page = acme_admin_client.get(admin_url("tenant")).content.decode()
    assert "Acme" in page and "Globex" not in page
    prompts = acme_admin_client.get(admin_url("systemprompt")).content.decode()
    assert "acme v1" in prompts and "globex" not in prompts


@pytest.mark.parametrize("model", ["tenant", "systemprompt", "samplingprofile", "membership", "auditlog"])
def test_tenant_admin_cannot_open_another_tenants_objects(acme_admin_client, other_tenant, model):
    obj = {
        "tenant": other_tenant,
        "systemprompt": SystemPrompt.objects.filter(tenant=other_tenant).first(),
        "samplingprofile": SamplingProfile.objects.filter(tenant=other_tenant).first(),
        "membership": None,
        "auditlog": AuditLog.objects.filter(tenant=other_tenant).first(),
    }[model]
    if obj is None:
        obj = services.add_member(other_tenant, _user("gus"))
    response = acme_admin_client.get(admin_url(model, "change", obj.pk))
    # The admin answers an object outside the queryset with a redirect to its index ("doesn't exist").
    assert response.status_code == 302 and response.url == reverse("admin:index")


def _user(username):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username=username)


def test_tenant_admin_cannot_edit_another_tenants_profile_by_post(acme_admin_client, other_tenant):
    profile = SamplingProfile.objects.get(tenant=other_tenant, name="chat")
    response = acme_admin_client.post(admin_url("samplingprofile", "change", profile.pk), {"temperature": 1.9})
    assert response.status_code == 302
    profile.refresh_from_db()
    assert profile.temperature == 0.7


def test_tenant_admin_cannot_add_objects_to_another_tenant(acme_admin_client, other_tenant):
    response = acme_admin_client.post(
        admin_url("systemprompt", "add"), {"tenant": other_tenant.pk, "text": "hijack", "note": "", "activate": "on"}
    )
    assert response.status_code == 200  # the form again, with an error on tenant
    assert "Select a valid choice" in response.content.decode()
    assert selectors.active_system_prompt(other_tenant).text == "Globex secret prompt"


def test_tenant_admin_cannot_add_tenants_or_see_users(acme_admin_client):
    assert acme_admin_client.get(admin_url("tenant", "add")).status_code == 403
    assert acme_admin_client.get(reverse("admin:auth_user_changelist")).status_code == 403


def test_member_and_anonymous_are_kept_out_of_admin(client, member):
    assert client.get(reverse("admin:index")).status_code == 302
    client.force_login(member)
    response = client.get(reverse("admin:index"))
    assert response.status_code == 302 and reverse("admin:login") in response.url


def test_superuser_sees_every_tenant(client, superuser, tenant, other_tenant):
    client.force_login(superuser)
    page = client.get(admin_url("tenant")).content.decode()
    assert "Acme" in page and "Globex" in page


# --- admin writes go through services: versioned, validated, audited ---
def test_admin_add_system_prompt_creates_a_version_and_audits(acme_admin_client, tenant, tenant_admin):
    response = acme_admin_client.post(
        admin_url("systemprompt", "add"), {"tenant": tenant.pk, "text": "Acme v2", "note": "tone", "activate": "on"}
    )
    assert response.status_code == 302
    active = selectors.active_system_prompt(tenant)
    assert (active.version, active.text, active.created_by) == (2, "Acme v2", tenant_admin)
    assert AuditLog.objects.filter(action="system_prompt.create", actor=tenant_admin, tenant=tenant).exists()


def test_admin_shows_profile_validation_errors(acme_admin_client, tenant):
    profile = SamplingProfile.objects.get(tenant=tenant, name="coding")
    data = {f: getattr(profile, f) for f in ["name", "description", "temperature", "top_p", "top_k", "min_p",
                                              "repetition_penalty", "presence_penalty", "frequency_penalty",
                                              "max_tokens", "min_tokens", "n"]}
    data.update({"stop": "[]", "stop_token_ids": "[]", "seed": "", "logprobs": "", "top_p": "1.7"})
    response = acme_admin_client.post(admin_url("samplingprofile", "change", profile.pk), data)
    assert response.status_code == 200 and "errorlist" in response.content.decode()
    profile.refresh_from_db()
    assert profile.top_p == 0.9

    data["top_p"] = "0.8"
    response = acme_admin_client.post(admin_url("samplingprofile", "change", profile.pk), data)
    assert response.status_code == 302
    entry = AuditLog.objects.get(action="sampling_profile.update")
    assert (entry.before["top_p"], entry.after["top_p"], entry.actor_repr) == (0.9, 0.8, "ann")


def test_admin_membership_and_key_changes_are_audited(acme_admin_client, tenant, make_user):
    carol = make_user("carol")
    response = acme_admin_client.post(admin_url("membership", "add"), {"user": carol.pk, "tenant": tenant.pk,
                                                                         "role": "member"})
    assert response.status_code == 302 and selectors.is_member(carol, tenant)
    response = acme_admin_client.post(reverse("admin:api_apikey_add"), {"tenant": tenant.pk, "name": "bot",
                                                                     "rpm_limit": "5", "tpm_limit": ""}, follow=True)
    page = response.content.decode()
    assert "it will not be shown again" in page
    actions = set(AuditLog.objects.filter(actor_repr="ann").values_list("action", flat=True))
    assert {"membership.create", "api_key.create"} <= actions


def test_admin_bulk_delete_goes_through_services(acme_admin_client, tenant, make_user):
    membership = services.add_member(tenant, make_user("dave"))
    response = acme_admin_client.post(
        admin_url("membership"), {"action": "delete_selected", "_selected_action": [membership.pk], "post": "yes"}
    )
    assert response.status_code == 302
    assert not Membership.objects.filter(pk=membership.pk).exists()
    assert AuditLog.objects.filter(action="membership.delete", actor_repr="ann").exists()


def test_audit_log_is_read_only_in_admin(acme_admin_client, tenant):
    entry = AuditLog.objects.filter(tenant=tenant).first()
    assert acme_admin_client.get(admin_url("auditlog")).status_code == 200
    assert acme_admin_client.post(admin_url("auditlog", "delete", entry.pk), {"post": "yes"}).status_code == 403


# --- console ---
def test_console_shows_own_tenant_and_hides_others(acme_admin_client, tenant, other_tenant):
    page = acme_admin_client.get(reverse("console:tenant", args=[tenant.slug]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Acme prompt" in html and "coding" in html and "ann" in html
    assert acme_admin_client.get(reverse("console:tenant", args=[other_tenant.slug])).status_code == 404
    assert acme_admin_client.get(reverse("console:tenant_engine", args=[other_tenant.slug])).status_code == 404
    response = acme_admin_client.post(reverse("console:save_prompt", args=[other_tenant.slug]), {"text": "hijack"})
    assert response.status_code == 404
    response = acme_admin_client.post(reverse("console:activate_prompt", args=[other_tenant.slug, 1]))
    assert response.status_code == 404
    assert selectors.active_system_prompt(other_tenant).text == "Globex secret prompt"


def test_console_index_redirects_a_single_tenant_admin(acme_admin_client, tenant):
    response = acme_admin_client.get(reverse("console:index"))
    assert response.status_code == 302 and response.url == reverse("console:tenant", args=[tenant.slug])


def test_console_requires_login_and_admin_role(client, tenant, member):
    response = client.get(reverse("console:tenant", args=[tenant.slug]))
    assert response.status_code == 302 and reverse("login") in response.url
    client.force_login(member)
    assert client.get(reverse("console:tenant", args=[tenant.slug])).status_code == 404


def test_console_prompt_form_versions_and_rolls_back(acme_admin_client, tenant):
    response = acme_admin_client.post(reverse("console:save_prompt", args=[tenant.slug]), {"text": "v2", "note": ""})
    assert response.status_code == 302 and selectors.active_system_prompt(tenant).version == 2
    response = acme_admin_client.post(reverse("console:save_prompt", args=[tenant.slug]), {"text": "  ", "note": ""})
    assert response.status_code == 400 and "The system prompt is empty" in response.content.decode()
    acme_admin_client.post(reverse("console:activate_prompt", args=[tenant.slug, 1]))
    assert selectors.active_system_prompt(tenant).version == 1
    acme_admin_client.post(reverse("console:deactivate_prompt", args=[tenant.slug]))
    assert selectors.active_system_prompt(tenant) is None


def test_console_engine_json_without_engine(acme_admin_client, tenant, no_engine):
    data = acme_admin_client.get(reverse("console:tenant_engine", args=[tenant.slug])).json()
    assert data["engine"]["state"] in {"off", "stopped"} and data["engine"]["alive"] is False
    assert data["stats"] is None and data["pin"]["engine"] is False and data["pins"] == {}


def test_engine_stats_json_needs_superuser_or_token(client, superuser):
    url = reverse("console:engine_stats")
    assert client.get(url).status_code == 403
    assert client.get(url, headers={panels.STATS_TOKEN_HEADER: "wrong"}).status_code == 403
    assert client.get(url, headers={panels.STATS_TOKEN_HEADER: panels.stats_token()}).status_code == 200
    client.force_login(superuser)
    assert client.get(url).status_code == 200


def test_login_page_renders_and_logs_in(client, tenant_admin):
    assert client.get(reverse("login")).status_code == 200
    response = client.post(reverse("login"), {"username": "ann", "password": "pw"})
    assert response.status_code == 302


def test_tenant_admin_can_log_in_through_the_admin_login(client, tenant_admin):
    response = client.post(reverse("admin:login"), {"username": "ann", "password": "pw", "next": "/admin/"})
    assert response.status_code == 302 and response.url == "/admin/"
    assert client.get("/admin/").status_code == 200
