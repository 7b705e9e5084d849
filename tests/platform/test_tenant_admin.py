"""The admin site's tenant governance: a superuser deletes a tenant with everything it owns (tenant admins
cannot), and a tenant admin's membership form lists only their own people."""
import pytest
from chat import history
from django.test import Client

from tenants import services
from api import services as api_services
from api.models import ApiKey
from chat.models import Conversation
from tenants.models import AuditLog, Membership, SamplingProfile, SystemPrompt, Tenant

pytestmark = pytest.mark.django_db


def _admin_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _populated(tenant, member) -> None:
    services.create_system_prompt(tenant, "You are helpful.")
    api_services.create_api_key(tenant, "tool")
    conversation = history.create_conversation(tenant, member)
    history.add_user_message(conversation, "hello")


def test_a_superuser_deletes_a_tenant_with_everything_it_owns(superuser, tenant, other_tenant, member):
    _populated(tenant, member)
    page = _admin_client(superuser).get(f"/admin/tenants/tenant/{tenant.pk}/delete/")
    assert page.status_code == 200 and "Cannot delete" not in page.content.decode()
    response = _admin_client(superuser).post(f"/admin/tenants/tenant/{tenant.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert list(Tenant.objects.all()) == [other_tenant]
    for model in (SamplingProfile, SystemPrompt, ApiKey, Conversation, Membership):
        assert not model.objects.filter(tenant_id=tenant.pk).exists(), model
    assert SamplingProfile.objects.filter(tenant=other_tenant).exists()
    entry = AuditLog.objects.get(action="tenant.delete")
    assert entry.actor == superuser and entry.before["slug"] == "acme"


def test_a_tenant_admin_cannot_delete_their_tenant(tenant, tenant_admin):
    response = _admin_client(tenant_admin).post(f"/admin/tenants/tenant/{tenant.pk}/delete/", {"post": "yes"})
    assert response.status_code == 403
    assert Tenant.objects.filter(pk=tenant.pk).exists()


def test_a_tenant_admins_membership_form_lists_only_their_people(tenant, other_tenant, tenant_admin, member,
                                                                 make_user, superuser):
    outsider = make_user("otto")
    services.add_member(other_tenant, outsider)
    newcomer = make_user("nina")  # of no tenant yet
    page = _admin_client(tenant_admin).get("/admin/tenants/membership/add/").content.decode()
    assert f'value="{member.pk}"' in page and f'value="{newcomer.pk}"' in page
    assert f'value="{outsider.pk}"' not in page and "otto" not in page
    response = _admin_client(tenant_admin).post("/admin/tenants/membership/add/",
                                                {"user": outsider.pk, "tenant": tenant.pk, "role": "member"})
    assert response.status_code == 200 and not Membership.objects.filter(user=outsider, tenant=tenant).exists()
    assert "otto" in _admin_client(superuser).get("/admin/tenants/membership/add/").content.decode()
