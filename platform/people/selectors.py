"""Reads of the console's people page: one tenant's members and open invitations, nothing of others."""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet
from django.utils import timezone

from people.models import Invitation
from people.services import effect_for
from tenants.models import Membership, Tenant


@dataclass(frozen=True)
class MemberRow:
    membership: Membership
    offboard_effect: str  # people.services.DEACTIVATED or REMOVED


def member_rows(tenant: Tenant) -> list[MemberRow]:
    """The tenant's members (the user loaded) with what offboarding each would do."""
    memberships = Membership.objects.filter(tenant=tenant).select_related("user", "tenant").order_by("user__username")
    in_others = set(Membership.objects.filter(user__memberships__tenant=tenant).exclude(tenant=tenant)
                    .values_list("user_id", flat=True))
    return [MemberRow(m, effect_for(m.user, in_other_tenants=m.user_id in in_others)) for m in memberships]


def open_invitations(tenant: Tenant) -> QuerySet[Invitation]:
    return (Invitation.objects.filter(tenant=tenant, accepted_at=None, expires_at__gt=timezone.now())
            .select_related("created_by").order_by("-created_at"))
