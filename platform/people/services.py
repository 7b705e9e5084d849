"""Tenant admins managing their own people. Each function checks what a tenant admin may do, writes
through tenants.services or the account's own save (so the audit log and offboarding signals fire as
for any other path) and records its own audit entries.

    invite(tenant, email=..., username=..., role=..., actor=admin) -> (Invitation, token)
    accept(token, user)                      # the link, opened by a logged-in person
    claim_reserved(user)                     # single sign-on: invitations matching e-mail or username
    change_role(membership, role, actor=admin)
    offboard(membership, actor=admin)        # "deactivated" or "removed" (the rule: offboard_effect)
    reactivate(membership, actor=admin)

A tenant admin never names an existing account: they name a person by e-mail or username, and the
person joins by opening the link (with a new account, or with the one they have) or by signing in
through the directory. So nothing tells the admin whether that person already has an account, or in
which tenants.
"""
from __future__ import annotations

import datetime
import hashlib
import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from people.models import Invitation
from tenants import audit, services as tenant_services
from tenants.accounts import set_actor
from tenants.models import Membership, Tenant

DEACTIVATED = "deactivated"
REMOVED = "removed"


class InvitationInvalid(Exception):
    """The token names no invitation, or one that was used or has expired (one answer for all three)."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# --- invitations ----------------------------------------------------------------------------------------
@transaction.atomic
def invite(tenant: Tenant, *, email: str = "", username: str = "", role: str = Membership.Role.MEMBER,
           actor=None) -> tuple[Invitation, str]:
    """Reserve a membership of `tenant` for the person with `email` and/or `username`.

    Returns (invitation, token): the token goes in the link (people:accept) and is not stored; it is
    valid for PAGODA_INVITATION_DAYS. Raises ValidationError on bad input.
    """
    token = secrets.token_urlsafe(32)
    invitation = Invitation(
        tenant=tenant, email=email.strip().lower(), username=username.strip(), role=role,
        token_hash=hash_token(token), created_by=actor if getattr(actor, "is_authenticated", False) else None,
        expires_at=timezone.now() + datetime.timedelta(days=settings.PAGODA_INVITATION_DAYS))
    invitation.full_clean()
    invitation.save()
    audit.record("invitation.create", actor=actor, instance=invitation, after=audit.snapshot(invitation))
    return invitation, token


@transaction.atomic
def revoke(invitation: Invitation, *, actor=None) -> None:
    audit.record("invitation.revoke", actor=actor, instance=invitation, before=audit.snapshot(invitation))
    invitation.delete()


def open_invitation(token: str) -> Invitation:
    """The invitation a link's token names, if it can still be accepted; InvitationInvalid otherwise."""
    invitation = Invitation.objects.select_related("tenant").filter(token_hash=hash_token(token or "")).first()
    if invitation is None or not invitation.is_open or not invitation.tenant.is_active:
        raise InvitationInvalid()
    return invitation


@transaction.atomic
def accept(token: str, user) -> Membership:
    """`user` (logged in, or just created from the link) takes up the invitation: they become a
    member with its role (an existing membership keeps the higher of the two roles)."""
    invitation = Invitation.objects.select_for_update().filter(pk=open_invitation(token).pk).first()
    if invitation is None or not invitation.is_open:  # taken up meanwhile
        raise InvitationInvalid()
    return _take_up(invitation, user, how="link")


def _take_up(invitation: Invitation, user, *, how: str) -> Membership:
    current = Membership.objects.filter(tenant=invitation.tenant, user=user).first()
    role = invitation.role
    if current is not None and current.is_admin:
        role = current.role  # an invitation never demotes
    membership = tenant_services.add_member(invitation.tenant, user, role=role, actor=user)
    invitation.accepted_at, invitation.accepted_by = timezone.now(), user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    audit.record("invitation.accept", actor=user, instance=invitation,
                 after={"username": user.get_username(), "role": membership.role, "how": how})
    return membership


@transaction.atomic
def claim_reserved(user, *, by_email: bool = True) -> list[Membership]:
    """At a single sign-on login: take up every open invitation whose username or e-mail is the user's,
    as the directory or provider gave them (the e-mail only when `by_email`: a provider that says the
    address is unverified does not get it matched). Returns the memberships made."""
    match = Q(username__iexact=user.get_username())
    if user.email and by_email:
        match |= Q(email__iexact=user.email)
    invitations = (Invitation.objects.select_for_update().select_related("tenant")
                   .filter(match, accepted_at=None, expires_at__gt=timezone.now(), tenant__is_active=True))
    return [_take_up(invitation, user, how="single sign-on") for invitation in invitations]


# --- members --------------------------------------------------------------------------------------------
def _not_yourself(membership: Membership, actor) -> None:
    if actor is not None and membership.user_id == getattr(actor, "pk", None):
        raise ValidationError("You cannot change your own membership here; ask another admin of this tenant.")


def change_role(membership: Membership, role: str, *, actor=None) -> Membership:
    """Make the member a tenant admin or a plain member (audited as membership.update)."""
    _not_yourself(membership, actor)
    if role not in Membership.Role.values:
        raise ValidationError(f"Unknown role {role!r}.")
    return tenant_services.add_member(membership.tenant, membership.user, role=role, actor=actor)


def offboard_effect(membership: Membership) -> str:
    """What offboarding this member does: DEACTIVATED when this tenant is all they belong to (the
    account is closed), else REMOVED (they leave this tenant and keep their others). Staff and
    superusers are Pagoda's own administrators: a tenant admin only ever removes them."""
    user = membership.user
    others = Membership.objects.filter(user=user).exclude(tenant_id=membership.tenant_id).exists()
    return effect_for(user, in_other_tenants=others)


def effect_for(user, *, in_other_tenants: bool) -> str:
    return REMOVED if in_other_tenants or user.is_staff or user.is_superuser else DEACTIVATED


@transaction.atomic
def offboard(membership: Membership, *, actor=None) -> str:
    """Deactivate the member's account or remove them from the tenant (offboard_effect); returns which.

    Both take effect at once through the paths every offboarding takes: a deactivation ends the
    user's sessions and closes their chat sockets (tenants.accounts, chat.signals); a removal closes
    their sockets on this tenant. A deactivated member stays listed, so they can be reactivated.
    """
    _not_yourself(membership, actor)
    effect = offboard_effect(membership)
    if effect == REMOVED:
        tenant_services.remove_member(membership, actor=actor)
        return REMOVED
    user = membership.user
    if user.is_active:
        set_actor(user, actor)
        user.is_active = False
        user.save(update_fields=["is_active"])
    return DEACTIVATED


@transaction.atomic
def reactivate(membership: Membership, *, actor=None) -> None:
    """Undo a deactivation, under the same rule: only an account of no other tenant."""
    _not_yourself(membership, actor)
    if offboard_effect(membership) != DEACTIVATED:
        raise ValidationError("This account belongs to other tenants too; only a Pagoda administrator can "
                              "reactivate it.")
    user = membership.user
    if not user.is_active:
        set_actor(user, actor)
        user.is_active = True
        user.save(update_fields=["is_active"])
