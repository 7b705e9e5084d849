"""Applying retention: delete the conversations whose last activity is older than their tenant's period.

A conversation's age is that of its newest message (its creation when it has none): a thread still
in use is kept whatever its start. Its usage stays in the ledger. Every run is audited: one entry per
tenant with a policy (how many went, the cutoff) and one for the run, even when nothing was deleted.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Max, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from governance.models import RetentionPolicy
from tenants import audit
from chat.models import Conversation
from tenants.models import Tenant


@dataclass(frozen=True)
class TenantRetention:
    tenant_slug: str
    retention_days: int
    cutoff: datetime.datetime
    num_conversations: int


def expired_conversations(tenant: Tenant, cutoff: datetime.datetime) -> QuerySet[Conversation]:
    """The tenant's conversations whose newest message (or creation) is before `cutoff`."""
    return (Conversation.objects.filter(tenant=tenant)
            .annotate(last_activity=Coalesce(Max("messages__created_at"), "created_at"))
            .filter(last_activity__lt=cutoff))


def apply_retention(*, now: datetime.datetime | None = None, tenant_slug: str | None = None,
                    dry_run: bool = False) -> list[TenantRetention]:
    """Delete what each policy says is too old (only `tenant_slug`'s with it); with dry_run, only count."""
    now = now or timezone.now()
    policies = RetentionPolicy.objects.select_related("tenant").order_by("tenant__slug")
    if tenant_slug is not None:
        policies = policies.filter(tenant__slug=tenant_slug)
    results = []
    for policy in policies:
        cutoff = now - datetime.timedelta(days=policy.retention_days)
        with transaction.atomic():
            ids = list(expired_conversations(policy.tenant, cutoff).values_list("pk", flat=True))
            if not dry_run and ids:
                Conversation.objects.filter(pk__in=ids).delete()
            result = TenantRetention(policy.tenant.slug, policy.retention_days, cutoff, len(ids))
            if not dry_run:
                audit.record("retention.apply", tenant=policy.tenant, instance=policy,
                             after={"retention_days": policy.retention_days, "cutoff": cutoff.isoformat(),
                                    "deleted_conversations": len(ids)})
        results.append(result)
    if not dry_run:
        audit.record("retention.run", after={"tenants": len(results),
                                             "deleted_conversations": sum(r.num_conversations for r in results)})
    return results


def set_retention(tenant: Tenant, retention_days: int | None, *, actor=None) -> RetentionPolicy | None:
    """Set (or, with None, remove) the tenant's retention period; audited."""
    policy = RetentionPolicy.objects.filter(tenant=tenant).first()
    before = audit.snapshot(policy)
    if retention_days is None:
        if policy is not None:
            policy.delete()
            audit.record("retention.remove", actor=actor, tenant=tenant, before=before)
        return None
    if retention_days < 1:
        raise ValueError("a retention period is at least one day")
    policy = policy or RetentionPolicy(tenant=tenant)
    policy.retention_days = retention_days
    policy.save()
    audit.record("retention.set", actor=actor, instance=policy, before=before, after=audit.snapshot(policy))
    return policy
