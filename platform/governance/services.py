"""Writes of budget settings (console, admin and `manage.py set_budget`), each audited."""
from __future__ import annotations

from django.core.exceptions import ValidationError

from governance.models import Budget
from tenants import audit
from tenants.models import Membership, Tenant


def set_budget(tenant: Tenant, *, period: str, max_tokens: int, scope: str = Budget.Scope.TENANT,
               source: str = Budget.Source.ALL, user=None, actor=None) -> Budget:
    """Create or change the tenant's budget of (scope, user, period, source). Raises ValidationError for
    a combination that cannot be (a user who is not a member, an employee budget on API calls...)."""
    if user is not None and not Membership.objects.filter(tenant=tenant, user=user).exists():
        raise ValidationError({"user": f"{user.get_username()} is not a member of {tenant.slug}."})
    budget = Budget.objects.filter(tenant=tenant, scope=scope, user=user, period=period, source=source).first()
    before = audit.snapshot(budget)
    budget = budget or Budget(tenant=tenant, scope=scope, user=user, period=period, source=source)
    budget.max_tokens = max_tokens
    budget.full_clean()
    budget.save()
    audit.record("budget.set", actor=actor, instance=budget, before=before, after=audit.snapshot(budget))
    return budget


def delete_budget(budget: Budget, *, actor=None) -> None:
    before = audit.snapshot(budget)
    tenant = budget.tenant
    budget.delete()
    audit.record("budget.delete", actor=actor, tenant=tenant, before=before)
