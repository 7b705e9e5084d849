"""Every read the platform makes about tenants, members, prompts, profiles and the audit log."""
from django.db.models import Q, QuerySet

from tenants.models import AuditLog, Membership, SamplingProfile, SystemPrompt, Tenant


# --- who may do what ---
def tenants_for_user(user) -> QuerySet[Tenant]:
    """The active tenants `user` is a member of (any role)."""
    if not user.is_authenticated:
        return Tenant.objects.none()
    return Tenant.objects.filter(is_active=True, memberships__user=user).distinct()


def admin_tenants_for_user(user) -> QuerySet[Tenant]:
    """The tenants `user` administers: all of them for a superuser, else those where the role is admin."""
    if not user.is_authenticated or not user.is_active:
        return Tenant.objects.none()
    if user.is_superuser:
        return Tenant.objects.all()
    return Tenant.objects.filter(memberships__user=user, memberships__role=Membership.Role.ADMIN).distinct()


def is_any_tenant_admin(user) -> bool:
    return user.is_authenticated and Membership.objects.filter(user=user, role=Membership.Role.ADMIN).exists()


def is_tenant_admin(user, tenant: Tenant) -> bool:
    return admin_tenants_for_user(user).filter(pk=tenant.pk).exists()


def is_member(user, tenant: Tenant) -> bool:
    return user.is_authenticated and Membership.objects.filter(user=user, tenant=tenant).exists()


def users_a_tenant_admin_may_add(admin_user) -> QuerySet:
    """The users a tenant admin may pick for a membership: members of a tenant they administer, and
    users of no tenant yet (pre-provisioned); never another tenant's people."""
    from django.contrib.auth import get_user_model

    users = get_user_model().objects.filter(is_active=True)
    administered = admin_tenants_for_user(admin_user)
    return users.filter(Q(memberships__tenant__in=administered) | Q(memberships__isnull=True)).distinct().order_by(
        "username")


def members(tenant: Tenant) -> QuerySet[Membership]:
    return Membership.objects.filter(tenant=tenant).select_related("user").order_by("user__username")


# --- prompts and profiles ---
def active_system_prompt(tenant: Tenant) -> SystemPrompt | None:
    return SystemPrompt.objects.filter(tenant=tenant, is_active=True).first()


def system_prompt_history(tenant: Tenant) -> QuerySet[SystemPrompt]:
    return SystemPrompt.objects.filter(tenant=tenant).select_related("created_by").order_by("-version")


def profiles(tenant: Tenant) -> QuerySet[SamplingProfile]:
    return SamplingProfile.objects.filter(tenant=tenant).order_by("-is_default", "name")


def default_profile(tenant: Tenant) -> SamplingProfile | None:
    return SamplingProfile.objects.filter(tenant=tenant, is_default=True).first()


def profile_by_name(tenant: Tenant, name: str) -> SamplingProfile | None:
    """The tenant's profile called `name` (what the API calls the model); None if it has none."""
    return SamplingProfile.objects.filter(tenant=tenant, name=name).first()


# --- audit ---
def audit_log(tenant: Tenant, *, limit: int = 20) -> QuerySet[AuditLog]:
    return AuditLog.objects.filter(tenant=tenant).order_by("-created_at", "-id")[:limit]
