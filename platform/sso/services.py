"""Administrators' changes to the group mappings, each audited (sso_mapping.create / update / delete)
with the mapping's fields before and after. A change takes effect at each user's next login."""
from __future__ import annotations

from django.db import transaction

from sso.models import GroupMapping
from tenants import audit


@transaction.atomic
def save_mapping(mapping: GroupMapping, *, actor=None) -> GroupMapping:
    """Validate and save a new or changed mapping; raises ValidationError on bad input."""
    before = audit.snapshot(GroupMapping.objects.filter(pk=mapping.pk).first()) if mapping.pk else None
    mapping.group = mapping.group.strip()
    mapping.full_clean()
    mapping.save()
    after = audit.snapshot(mapping)
    if before != after:
        action = "sso_mapping.create" if before is None else "sso_mapping.update"
        audit.record(action, actor=actor, instance=mapping, before=before, after=after)
    return mapping


@transaction.atomic
def delete_mapping(mapping: GroupMapping, *, actor=None) -> None:
    audit.record("sso_mapping.delete", actor=actor, instance=mapping, before=audit.snapshot(mapping))
    mapping.delete()
