from django.core.exceptions import ValidationError
from django.db import transaction

from tenants import audit, pin_events
from tenants.models import Membership, Tenant
from tenants.services.profiles import create_builtin_profiles


@transaction.atomic
def create_tenant(*, name: str, slug: str, actor=None, is_active: bool = True) -> Tenant:
    """A new tenant with the built-in "chat" (default) and "coding" sampling profiles.

    Raises ValidationError on a bad or taken slug.
    """
    tenant = Tenant(name=name, slug=slug, is_active=is_active)
    tenant.full_clean()
    tenant.save()
    create_builtin_profiles(tenant)
    audit.record("tenant.create", actor=actor, instance=tenant, after=audit.snapshot(tenant))
    return tenant


@transaction.atomic
def update_tenant(tenant: Tenant, *, actor=None, name: str | None = None, is_active: bool | None = None) -> Tenant:
    """Rename or (de)activate a tenant (its slug changes only through rename_tenant). Deactivating
    unpins its prompt."""
    before = audit.snapshot(Tenant.objects.get(pk=tenant.pk))
    if name is not None:
        tenant.name = name
    if is_active is not None:
        tenant.is_active = is_active
    tenant.full_clean()
    tenant.save(update_fields=["name", "is_active"])
    after = audit.snapshot(tenant)
    if before != after:
        audit.record("tenant.update", actor=actor, instance=tenant, before=before, after=after)
    if before["is_active"] != tenant.is_active:
        transaction.on_commit(lambda: pin_events.tenant_changed(tenant.pk, tenant.pin_key))
    return tenant


def rename_tenant(tenant: Tenant, new_slug: str, *, actor=None) -> Tenant:
    """Change a tenant's slug (a typo at creation): audited as tenant.rename.

    Everything that finds the tenant by its slug follows at once: console URLs (the old ones answer
    404), the engine's pin key and prefix-cache key (the prompt is re-pinned under the new key and
    the old pin dropped, on every replica), the models' `owned_by`. What is keyed by the tenant's id
    does not move (memberships, conversations, keys, budgets, chat-socket groups, the audit log). The
    ledger keeps the slug each row was written under. Raises ValidationError on a bad or taken slug.
    """
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
        old_slug, old_pin_key = tenant.slug, tenant.pin_key
        if new_slug == old_slug:
            raise ValidationError({"slug": f"The tenant is already called {old_slug!r}."})
        tenant.slug = new_slug
        tenant.full_clean()
        tenant.save(update_fields=["slug"])
        audit.record("tenant.rename", actor=actor, instance=tenant, before={"slug": old_slug},
                     after={"slug": new_slug})
        # the old key is announced: each replica re-pins the tenant under its new key and drops the old
        transaction.on_commit(lambda: pin_events.tenant_changed(tenant.pk, old_pin_key))
    return tenant


@transaction.atomic
def add_member(tenant: Tenant, user, *, role: str = Membership.Role.MEMBER, actor=None) -> Membership:
    """Make `user` a member of `tenant` with `role`, or change the role of an existing membership."""
    membership = Membership.objects.filter(tenant=tenant, user=user).first()
    before = audit.snapshot(membership)
    if membership is None:
        membership = Membership(tenant=tenant, user=user, role=role)
    membership.role = role
    membership.full_clean(validate_unique=False)
    membership.save()
    after = audit.snapshot(membership)
    if before != after:
        action = "membership.create" if before is None else "membership.update"
        audit.record(action, actor=actor, instance=membership, before=before, after=after)
    return membership


@transaction.atomic
def remove_member(membership: Membership, *, actor=None) -> None:
    before = audit.snapshot(membership)
    audit.record("membership.delete", actor=actor, instance=membership, before=before)
    membership.delete()


def delete_tenant(tenant: Tenant, *, actor=None) -> None:
    """Delete a tenant and everything it owns (prompts, profiles, keys, conversations); the audit log stays."""
    tenant_id, pin_key = tenant.pk, tenant.pin_key  # delete() clears the pk
    with transaction.atomic():
        audit.record("tenant.delete", actor=actor, instance=tenant, before=audit.snapshot(tenant))
        tenant.delete()
        transaction.on_commit(lambda: pin_events.tenant_changed(tenant_id, pin_key))
