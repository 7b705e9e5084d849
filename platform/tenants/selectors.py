"""Every read the platform makes about tenants, prompts, profiles, keys, usage and the engine."""
import datetime

from django.db.models import Avg, Count, Q, QuerySet, Sum

from pagoda import daily
from tenants.models import ApiKey, ApiUsage, AuditLog, Membership, SamplingProfile, SystemPrompt, Tenant


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


# --- API keys ---
def api_key_by_plaintext(plaintext: str) -> ApiKey | None:
    """The key row for a presented key, revoked or not (the caller tells 401 from 403); tenant preloaded."""
    from tenants.services.api_keys import hash_api_key

    return ApiKey.objects.select_related("tenant").filter(hashed_key=hash_api_key(plaintext)).first()


def api_keys(tenant: Tenant) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(tenant=tenant).order_by("revoked_at", "-created_at")


# --- usage and audit ---
def api_usage_by_day(tenant: Tenant, *, days: int = 14, today: datetime.date | None = None) -> list[dict]:
    """The tenant's /v1 calls per day, oldest first, one row per day (zeros included).

    Rows: {"day", "num_requests", "num_errors", "prompt_tokens", "cached_tokens", "output_tokens", "total_tokens"}.
    """
    first, start = daily.since(days, today)
    calls = ApiUsage.objects.filter(tenant=tenant, created_at__gte=start)
    return daily.tokens_per_day(calls, first, days, num_requests=Count("id"),
                           num_errors=Count("id", filter=Q(status_code__gte=400)))


def api_usage_by_key(tenant: Tenant, *, days: int = 14, today: datetime.date | None = None) -> list[dict]:
    """Per API key of the tenant over the last `days`: {"key", "num_requests", "num_errors", "total_tokens",
    "avg_latency_ms"}, busiest first; keys without calls are left out."""
    _, start = daily.since(days, today)
    rows = (
        ApiUsage.objects.filter(tenant=tenant, created_at__gte=start, api_key__isnull=False)
        .values("api_key")
        .annotate(
            num_requests=Count("id"),
            num_errors=Count("id", filter=Q(status_code__gte=400)),
            prompt_tokens=Sum("num_prompt_tokens"),
            output_tokens=Sum("num_output_tokens"),
            avg_latency_ms=Avg("latency_ms"),
        )
        .order_by("-num_requests")
    )
    keys = ApiKey.objects.in_bulk([row["api_key"] for row in rows])
    return [
        {
            "key": keys[row["api_key"]],
            "num_requests": row["num_requests"],
            "num_errors": row["num_errors"],
            "total_tokens": (row["prompt_tokens"] or 0) + (row["output_tokens"] or 0),
            "avg_latency_ms": round(row["avg_latency_ms"]) if row["avg_latency_ms"] is not None else None,
        }
        for row in rows
    ]


def audit_log(tenant: Tenant, *, limit: int = 20) -> QuerySet[AuditLog]:
    return AuditLog.objects.filter(tenant=tenant).order_by("-created_at", "-id")[:limit]
