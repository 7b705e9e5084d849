"""Writing the audit log: a snapshot of an object's fields before and after a change."""
import datetime
import decimal
import uuid
from typing import Any

from django.db import models

from tenants.models import AuditLog, Tenant

# Fields never copied into the log.
_SECRET_FIELDS = {"password", "hashed_key"}


def _jsonable(value: Any) -> Any:
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    return value


def snapshot(instance: models.Model | None) -> dict | None:
    """The instance's concrete field values as JSON-safe data (foreign keys as ids); None for None."""
    if instance is None:
        return None
    data = {}
    for field in instance._meta.concrete_fields:
        if field.name in _SECRET_FIELDS:
            continue
        data[field.attname] = _jsonable(getattr(instance, field.attname))
    return data


def _tenant_of(instance: models.Model | None) -> Tenant | None:
    if isinstance(instance, Tenant):
        return instance
    return getattr(instance, "tenant", None)


def record(
    action: str,
    *,
    actor=None,
    instance: models.Model | None = None,
    tenant: Tenant | None = None,
    before: dict | None = None,
    after: dict | None = None,
) -> AuditLog:
    """Append one entry. `actor` None means a script or the system; tenant defaults to the instance's."""
    tenant = tenant or _tenant_of(instance)
    is_user = actor is not None and getattr(actor, "is_authenticated", False)
    return AuditLog.objects.create(
        actor=actor if is_user else None,
        actor_repr=actor.get_username() if is_user else "",
        tenant=tenant if tenant is not None and tenant.pk else None,
        action=action,
        object_type=instance._meta.label_lower if instance is not None else "",
        object_id=str(instance.pk) if instance is not None and instance.pk is not None else "",
        object_repr=str(instance)[:200] if instance is not None else "",
        before=before,
        after=after,
    )


def changed_fields(before: dict | None, after: dict | None) -> dict:
    """{field: (old, new)} for the fields that differ (for display)."""
    before, after = before or {}, after or {}
    return {k: (before.get(k), after.get(k)) for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)}
