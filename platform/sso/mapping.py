"""Re-applying the group mappings at every single sign-on login.

    apply_group_mappings(user, Source.LDAP, group_dns)   # sso.ldap_backend, sso.oidc (per login)

For each tenant that any mapping of the source names, the user's membership becomes what their groups
map to now: added, its role changed, or removed when no group maps to it any more. Changes go through
tenants.services (add_member / remove_member), so they are audited and a removal closes the user's
open chat sockets on that tenant (chat.signals). One "sso.login" audit entry records the groups seen
and what changed. Then the tenant admins' open invitations naming the user's e-mail or username are
taken up (people.services.claim_reserved): pre-provisioned memberships.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from people.services import claim_reserved
from sso.models import GroupMapping, Source
from tenants import audit, services
from tenants.models import Membership

_ROLE_RANK = {Membership.Role.MEMBER: 0, Membership.Role.ADMIN: 1}


@dataclass
class MappingResult:
    """What one login changed: tenant slugs granted (or whose role changed) and withdrawn."""

    granted: dict[str, str] = field(default_factory=dict)  # slug -> role
    withdrawn: list[str] = field(default_factory=list)


def wanted_roles(source: str, groups) -> tuple[dict[int, str], set[int]]:
    """({tenant_id: role} the groups give, the ids of every tenant `source` manages)."""
    names = {str(g).casefold() for g in groups}
    wanted: dict[int, str] = {}
    managed: set[int] = set()
    for mapping in GroupMapping.objects.filter(source=source):
        managed.add(mapping.tenant_id)
        if mapping.group.casefold() not in names:
            continue
        current = wanted.get(mapping.tenant_id)
        if current is None or _ROLE_RANK[mapping.role] > _ROLE_RANK[current]:
            wanted[mapping.tenant_id] = mapping.role
    return wanted, managed


@transaction.atomic
def apply_group_mappings(user, source: str, groups, *, email_verified: bool = True) -> MappingResult:
    """Make `user`'s memberships of the tenants `source` manages match `groups`, take up the
    invitations naming them (by e-mail only when `email_verified`); audit the login."""
    if source not in Source.values:
        raise ValueError(f"unknown single sign-on source {source!r}")
    groups = sorted({str(g) for g in groups})
    wanted, managed = wanted_roles(source, groups)
    result = MappingResult()
    existing = {m.tenant_id: m for m in Membership.objects.select_related("tenant")
                .select_for_update().filter(user=user, tenant_id__in=managed)}
    for tenant_id, membership in existing.items():
        if tenant_id not in wanted:
            result.withdrawn.append(membership.tenant.slug)
            services.remove_member(membership)
    for mapping in GroupMapping.objects.select_related("tenant").filter(source=source, tenant_id__in=wanted):
        tenant_id = mapping.tenant_id
        role = wanted[tenant_id]
        membership = existing.get(tenant_id)
        if (membership is None or membership.role != role) and mapping.tenant.slug not in result.granted:
            services.add_member(mapping.tenant, user, role=role)
            result.granted[mapping.tenant.slug] = role
    for membership in claim_reserved(user, by_email=email_verified):
        result.granted.setdefault(membership.tenant.slug, membership.role)
    audit.record("sso.login", actor=user, instance=user, after={
        "source": source, "groups": groups, "granted": result.granted, "withdrawn": sorted(result.withdrawn)})
    return result
