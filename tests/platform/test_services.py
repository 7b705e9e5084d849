import datetime
import hashlib

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from api import selectors as api_selectors
from api import services as api_services
from api.models import ApiKey
from chat import history
from chat import selectors as chat_selectors
from chat.models import Message
from tenants import selectors, services
from tenants.models import AuditLog, Membership


# --- tenants and members ---
def test_create_tenant_is_audited_and_slug_validated(superuser):
    tenant = services.create_tenant(name="Acme", slug="acme", actor=superuser)
    entry = AuditLog.objects.get(action="tenant.create")
    assert entry.tenant == tenant and entry.actor == superuser and entry.after["slug"] == "acme"
    with pytest.raises(ValidationError):
        services.create_tenant(name="Dup", slug="acme")
    with pytest.raises(ValidationError):
        services.create_tenant(name="Bad", slug="not a slug")


def test_update_tenant_records_before_and_after(tenant):
    services.update_tenant(tenant, name="Acme Corp")
    entry = AuditLog.objects.get(action="tenant.update")
    assert (entry.before["name"], entry.after["name"]) == ("Acme", "Acme Corp")


def test_add_member_then_change_role(tenant, make_user):
    user = make_user("carol")
    services.add_member(tenant, user)
    services.add_member(tenant, user, role=Membership.Role.ADMIN)
    assert Membership.objects.get(tenant=tenant, user=user).role == "admin"
    assert selectors.is_tenant_admin(user, tenant)
    assert [e.action for e in AuditLog.objects.filter(action__startswith="membership").order_by("id")] == [
        "membership.create",
        "membership.update",
    ]


def test_admin_tenants_are_scoped(tenant, other_tenant, tenant_admin, member, superuser):
    assert list(selectors.admin_tenants_for_user(tenant_admin)) == [tenant]
    assert not selectors.admin_tenants_for_user(member).exists()
    assert set(selectors.admin_tenants_for_user(superuser)) == {tenant, other_tenant}


# --- API keys ---
def test_api_key_plaintext_is_returned_once_and_only_its_hash_stored(tenant):
    key, plaintext = api_services.create_api_key(tenant, "wiki bot", rpm_limit=60, tpm_limit=10_000)
    assert plaintext.startswith("pgd-") and len(plaintext) > 40
    stored = ApiKey.objects.get(pk=key.pk)
    assert stored.hashed_key == hashlib.sha256(plaintext.encode()).hexdigest()
    assert plaintext not in {str(getattr(stored, f.attname)) for f in ApiKey._meta.concrete_fields}
    assert plaintext.startswith(stored.prefix)
    assert api_selectors.api_key_by_plaintext(plaintext) == stored
    assert api_selectors.api_key_by_plaintext(plaintext + "x") is None
    entry = AuditLog.objects.get(action="api_key.create")
    assert "hashed_key" not in entry.after and plaintext not in str(entry.after)


def test_revoke_and_touch_api_key(tenant):
    key, plaintext = api_services.create_api_key(tenant, "bot")
    api_services.revoke_api_key(key)
    revoked_at = api_selectors.api_key_by_plaintext(plaintext).revoked_at
    assert revoked_at is not None
    api_services.revoke_api_key(key)
    assert ApiKey.objects.get(pk=key.pk).revoked_at == revoked_at
    api_services.touch_api_key(key)
    first = ApiKey.objects.get(pk=key.pk).last_used_at
    api_services.touch_api_key(key)  # within a minute: no second write
    assert first is not None and ApiKey.objects.get(pk=key.pk).last_used_at == first


def test_update_api_key_limits(tenant):
    key, _ = api_services.create_api_key(tenant, "bot", rpm_limit=10)
    api_services.update_api_key(key, rpm_limit=None, tpm_limit=500)
    key.refresh_from_db()
    assert (key.rpm_limit, key.tpm_limit) == (None, 500)


# --- conversations and usage ---
def test_conversation_needs_membership(tenant, make_user):
    with pytest.raises(PermissionDenied):
        history.create_conversation(tenant, make_user("stranger"))


def test_conversation_flow_and_foreign_lookup(tenant, member, make_user):
    conversation = history.create_conversation(tenant, member)
    history.add_user_message(conversation, "  How do I   file expenses?\n")
    conversation.refresh_from_db()
    assert conversation.title == "How do I file expenses?"
    reply = history.create_pending_reply(conversation, profile=selectors.default_profile(tenant), system_prompt=None)
    assert reply.status == Message.Status.PENDING
    history.finish_reply(reply, content="Use the form.", status="stopped", finish_reason="abort",
                          num_prompt_tokens=20, num_cached_tokens=16, num_output_tokens=3)
    reply.refresh_from_db()
    assert (reply.status, reply.num_total_tokens, reply.completed_at is not None) == ("stopped", 23, True)
    assert chat_selectors.conversation_for_user(member, conversation.pk) == conversation
    assert chat_selectors.conversation_for_user(make_user("eve"), conversation.pk) is None
    with pytest.raises(ValueError):
        history.finish_reply(reply, content="", status="pending")
    with pytest.raises(PermissionDenied):
        history.delete_conversation(conversation, make_user("mallory"))
    history.delete_conversation(conversation, member)


def test_usage_by_day_sums_reply_tokens(tenant, other_tenant, member):
    conversation = history.create_conversation(tenant, member)
    for prompt_tokens, output_tokens in [(10, 5), (20, 7)]:
        reply = history.create_pending_reply(conversation, profile=None, system_prompt=None)
        history.finish_reply(reply, content="x", status="complete",
                              num_prompt_tokens=prompt_tokens, num_output_tokens=output_tokens)
    yesterday = history.create_pending_reply(conversation, profile=None, system_prompt=None)
    history.finish_reply(yesterday, content="x", status="complete", num_prompt_tokens=100, num_output_tokens=1)
    Message.objects.filter(pk=yesterday.pk).update(created_at=timezone.now() - datetime.timedelta(days=1))

    usage = chat_selectors.usage_by_day(tenant, days=3)
    assert [row["day"] for row in usage] == [timezone.localdate() - datetime.timedelta(days=n) for n in (2, 1, 0)]
    assert usage[-1] | {"day": None} == {
        "day": None, "num_replies": 2, "prompt_tokens": 30, "cached_tokens": 0, "output_tokens": 12, "total_tokens": 42,
    }
    assert usage[-2]["total_tokens"] == 101 and usage[0]["total_tokens"] == 0
    assert all(row["total_tokens"] == 0 for row in chat_selectors.usage_by_day(other_tenant, days=3))
