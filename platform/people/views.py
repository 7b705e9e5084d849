"""The console's people page (tenant admins) and the invitation link (anyone holding it). Thin: parse,
call people.services or selectors, render. Every object is looked up inside the tenant the URL names,
which tenant_admin_required has checked, so another tenant's rows answer 404."""
from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from people import selectors, services
from people.forms import InviteForm, NewAccountForm, RoleForm
from people.models import Invitation
from sso.environment import PASSWORD_BACKEND
from tenants.accounts import set_actor
from tenants.decorators import tenant_admin_required
from tenants.models import Membership, Tenant


# --- console (tenant admins) --------------------------------------------------------------------------
def _page(request, tenant: Tenant, form: InviteForm | None = None, status: int = 200):
    return render(request, "people/people.html", {
        "tenant": tenant,
        "rows": selectors.member_rows(tenant),
        "invitations": selectors.open_invitations(tenant),
        "form": form or InviteForm(),
        "roles": Membership.Role.choices,
        "invitation_days": settings.PAGODA_INVITATION_DAYS,
    }, status=status)


@tenant_admin_required
def people_page(request, tenant: Tenant):
    return _page(request, tenant)


@require_POST
@tenant_admin_required
def invite(request, tenant: Tenant):
    form = InviteForm(request.POST)
    if not form.is_valid():
        return _page(request, tenant, form, status=400)
    data = form.cleaned_data
    try:
        invitation, token = services.invite(tenant, email=data["email"], username=data["username"], role=data["role"],
                                            actor=request.user)
    except ValidationError as exc:
        form.add_error(None, exc)
        return _page(request, tenant, form, status=400)
    link = request.build_absolute_uri(reverse("people:accept", args=[token]))
    messages.warning(request, f"Invitation for {invitation.email or invitation.username}: {link} — send this link "
                              "now, it is not shown again.")
    return redirect("people:people", slug=tenant.slug)


def _membership(tenant: Tenant, membership_id: int) -> Membership:
    return get_object_or_404(Membership.objects.select_related("user", "tenant"), pk=membership_id, tenant=tenant)


def _run(request, tenant: Tenant, action, *args, success):
    """Call a service as the admin; `success(result)` is the message. A refusal is shown as an error."""
    try:
        result = action(*args, actor=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, success(result))
    return redirect("people:people", slug=tenant.slug)


@require_POST
@tenant_admin_required
def change_role(request, tenant: Tenant, membership_id: int):
    membership = _membership(tenant, membership_id)
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Pick a role.")
        return redirect("people:people", slug=tenant.slug)
    role = form.cleaned_data["role"]
    return _run(request, tenant, services.change_role, membership, role,
                success=lambda m: f"{m.user.get_username()} is now {m.get_role_display().lower()}.")


@require_POST
@tenant_admin_required
def offboard(request, tenant: Tenant, membership_id: int):
    membership = _membership(tenant, membership_id)
    name = membership.user.get_username()
    outcomes = {services.DEACTIVATED: f"{name}: deactivated (every session ended, open chats closed).",
                services.REMOVED: f"{name}: removed from {tenant.name} (their open chats here closed)."}
    return _run(request, tenant, services.offboard, membership, success=outcomes.get)


@require_POST
@tenant_admin_required
def reactivate(request, tenant: Tenant, membership_id: int):
    membership = _membership(tenant, membership_id)
    return _run(request, tenant, services.reactivate, membership,
                success=lambda _: f"{membership.user.get_username()} can sign in again.")


@require_POST
@tenant_admin_required
def revoke_invitation(request, tenant: Tenant, invitation_id: int):
    invitation = get_object_or_404(Invitation, pk=invitation_id, tenant=tenant, accepted_at=None)
    services.revoke(invitation, actor=request.user)
    messages.success(request, "Invitation withdrawn; its link no longer works.")
    return redirect("people:people", slug=tenant.slug)


# --- the invitation link --------------------------------------------------------------------------------
def accept(request, token: str):
    """GET: what the invitation offers; POST: join, with the account logged in or a new one."""
    try:
        invitation = services.open_invitation(token)
    except services.InvitationInvalid:
        return render(request, "people/accept.html", {"invalid": True}, status=404)
    can_create = PASSWORD_BACKEND in settings.AUTHENTICATION_BACKENDS
    context = {"invitation": invitation, "can_create": can_create,
               "login_url": f"{reverse('login')}?next={request.path}"}
    if request.user.is_authenticated:
        if request.method == "POST":
            return _accepted(request, token, request.user)
        return render(request, "people/accept.html", context)
    form = NewAccountForm(request.POST or None, initial={"username": invitation.username, "email": invitation.email})
    if request.method == "POST" and can_create and form.is_valid():
        user = form.save(commit=False)
        set_actor(user, user)  # the audit's user.create names them as who made it
        user.save()
        login(request, user, backend=PASSWORD_BACKEND)
        return _accepted(request, token, user)
    return render(request, "people/accept.html", {**context, "form": form},
                  status=400 if request.method == "POST" else 200)


def _accepted(request, token: str, user):
    try:
        membership = services.accept(token, user)
    except services.InvitationInvalid:
        return render(request, "people/accept.html", {"invalid": True}, status=404)
    messages.success(request, f"You are now a {membership.get_role_display().lower()} of {membership.tenant.name}.")
    return redirect("chat:index")
