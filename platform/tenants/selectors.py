"""Every read the platform makes about tenants, prompts, profiles, keys, usage and the engine."""
import datetime

from django.db.models import Avg, Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from tenants.models import ApiKey, ApiUsage, AuditLog, Conversation, Membership, Message, SamplingProfile, SystemPrompt, Tenant


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


# --- API keys ---
def api_key_by_plaintext(plaintext: str) -> ApiKey | None:
    """The key row for a presented key, revoked or not (the caller tells 401 from 403); tenant preloaded."""
    from tenants.services.api_keys import hash_api_key

    return ApiKey.objects.select_related("tenant").filter(hashed_key=hash_api_key(plaintext)).first()


def api_keys(tenant: Tenant) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(tenant=tenant).order_by("revoked_at", "-created_at")


# --- conversations ---
def conversations_for(user, tenant: Tenant) -> QuerySet[Conversation]:
    return Conversation.objects.filter(user=user, tenant=tenant).order_by("-updated_at")


def conversation_for_user(user, conversation_id: int) -> Conversation | None:
    """The conversation if it is the user's and the user is still a member of its tenant; else None."""
    return (
        Conversation.objects.select_related("tenant", "profile")
        .filter(pk=conversation_id, user=user, tenant__is_active=True, tenant__memberships__user=user)
        .first()
    )


def messages(conversation: Conversation) -> QuerySet[Message]:
    return Message.objects.filter(conversation=conversation).order_by("created_at", "id")


# --- usage and audit ---
def usage_by_day(tenant: Tenant, *, days: int = 14, today: datetime.date | None = None) -> list[dict]:
    """Token usage of the tenant's replies per day, oldest first, one row per day (zeros included).

    Rows: {"day", "num_replies", "prompt_tokens", "cached_tokens", "output_tokens", "total_tokens"}.
    """
    first, since = _since(days, today)
    replies = Message.objects.filter(conversation__tenant=tenant, role=Message.Role.ASSISTANT, created_at__gte=since)
    return _tokens_per_day(replies, first, days, num_replies=Count("id"))


def _since(days: int, today: datetime.date | None) -> tuple[datetime.date, datetime.datetime]:
    today = today or timezone.localdate()
    first = today - datetime.timedelta(days=days - 1)
    return first, timezone.make_aware(datetime.datetime.combine(first, datetime.time.min))


def api_usage_by_day(tenant: Tenant, *, days: int = 14, today: datetime.date | None = None) -> list[dict]:
    """The tenant's /v1 calls per day, oldest first, one row per day (zeros included).

    Rows: {"day", "num_requests", "num_errors", "prompt_tokens", "cached_tokens", "output_tokens", "total_tokens"}.
    """
    first, since = _since(days, today)
    calls = ApiUsage.objects.filter(tenant=tenant, created_at__gte=since)
    return _tokens_per_day(calls, first, days, num_requests=Count("id"),
                           num_errors=Count("id", filter=Q(status_code__gte=400)))


def _tokens_per_day(rows: QuerySet, first: datetime.date, days: int, **counts) -> list[dict]:
    """Rows with num_prompt/cached/output_tokens summed per local day from `first`, one row per day
    (zeros included), plus the `counts` aggregates under their names."""
    per_day = (
        rows.annotate(day=TruncDate("created_at", tzinfo=timezone.get_current_timezone()))
        .values("day")
        .annotate(
            **counts,
            prompt_tokens=Sum("num_prompt_tokens"),
            cached_tokens=Sum("num_cached_tokens"),
            output_tokens=Sum("num_output_tokens"),
        )
    )
    by_day = {row["day"]: row for row in per_day}
    result = []
    for offset in range(days):
        day = first + datetime.timedelta(days=offset)
        row = by_day.get(day, {})
        prompt, output = row.get("prompt_tokens") or 0, row.get("output_tokens") or 0
        result.append(
            {
                "day": day,
                **{name: row.get(name, 0) for name in counts},
                "prompt_tokens": prompt,
                "cached_tokens": row.get("cached_tokens") or 0,
                "output_tokens": output,
                "total_tokens": prompt + output,
            }
        )
    return result


def usage_overview(tenant: Tenant, *, days: int = 14, today: datetime.date | None = None) -> list[dict]:
    """Chat replies (usage_by_day) and API calls (api_usage_by_day) per day, added up: the console's table.

    Rows: {"day", "num_replies", "num_api_requests", "prompt_tokens", "cached_tokens", "output_tokens",
    "total_tokens", "api_tokens"}; the token columns are the sums of both sources, api_tokens the API's share.
    """
    chat = usage_by_day(tenant, days=days, today=today)
    api = api_usage_by_day(tenant, days=days, today=today)
    return [
        {
            "day": c["day"],
            "num_replies": c["num_replies"],
            "num_api_requests": a["num_requests"],
            **{k: c[k] + a[k] for k in ("prompt_tokens", "cached_tokens", "output_tokens", "total_tokens")},
            "api_tokens": a["total_tokens"],
        }
        for c, a in zip(chat, api)
    ]


def api_usage_by_key(tenant: Tenant, *, days: int = 14, today: datetime.date | None = None) -> list[dict]:
    """Per API key of the tenant over the last `days`: {"key", "num_requests", "num_errors", "total_tokens",
    "avg_latency_ms"}, busiest first; keys without calls are left out."""
    _, since = _since(days, today)
    rows = (
        ApiUsage.objects.filter(tenant=tenant, created_at__gte=since, api_key__isnull=False)
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
