import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from tenants import selectors, services
from tenants.models import AuditLog, SystemPrompt


def test_every_save_is_a_new_version_and_only_the_latest_is_active(tenant):
    for text in ["one", "two", "three"]:
        services.create_system_prompt(tenant, text)
    versions = list(SystemPrompt.objects.filter(tenant=tenant).order_by("version").values_list("version", "is_active"))
    assert versions == [(1, False), (2, False), (3, True)]
    assert selectors.active_system_prompt(tenant).text == "three"


def test_rollback_activates_an_older_version_and_keeps_history(tenant):
    for text in ["one", "two", "three"]:
        services.create_system_prompt(tenant, text)
    services.rollback_system_prompt(tenant, 1)
    assert selectors.active_system_prompt(tenant).version == 1
    assert SystemPrompt.objects.filter(tenant=tenant).count() == 3
    assert SystemPrompt.objects.filter(tenant=tenant, is_active=True).count() == 1
    with pytest.raises(SystemPrompt.DoesNotExist):
        services.rollback_system_prompt(tenant, 9)


def test_save_without_activating_keeps_the_active_one(tenant):
    services.create_system_prompt(tenant, "live")
    draft = services.create_system_prompt(tenant, "draft", activate=False)
    assert not draft.is_active and selectors.active_system_prompt(tenant).text == "live"


def test_deactivate_leaves_no_active_prompt(tenant):
    services.create_system_prompt(tenant, "one")
    assert services.deactivate_system_prompt(tenant).version == 1
    assert selectors.active_system_prompt(tenant) is None
    assert services.deactivate_system_prompt(tenant) is None


def test_versions_and_active_flags_are_per_tenant(tenant, other_tenant):
    services.create_system_prompt(tenant, "a1")
    services.create_system_prompt(other_tenant, "b1")
    services.create_system_prompt(tenant, "a2")
    assert selectors.active_system_prompt(other_tenant).version == 1
    assert selectors.active_system_prompt(tenant).version == 2


def test_database_allows_one_active_prompt_per_tenant(tenant):
    SystemPrompt.objects.create(tenant=tenant, version=1, text="x", is_active=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        SystemPrompt.objects.create(tenant=tenant, version=2, text="y", is_active=True)


@pytest.mark.parametrize("text", ["", "   \n"])
def test_empty_prompt_is_refused(tenant, text):
    with pytest.raises(ValidationError) as info:
        services.create_system_prompt(tenant, text)
    assert "text" in info.value.message_dict


def test_prompt_changes_are_audited(tenant, superuser):
    services.create_system_prompt(tenant, "one", actor=superuser)
    services.create_system_prompt(tenant, "two", actor=superuser)
    services.rollback_system_prompt(tenant, 1, actor=superuser)
    entries = AuditLog.objects.filter(tenant=tenant, action="system_prompt.activate").order_by("id")
    assert [(e.before, e.after) for e in entries] == [
        ({"active_version": None}, {"active_version": 1}),
        ({"active_version": 1}, {"active_version": 2}),
        ({"active_version": 2}, {"active_version": 1}),
    ]
    assert {e.actor_repr for e in entries} == {"root"}
