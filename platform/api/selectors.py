"""The api app's reads: keys by their plaintext or tenant, and the tenants' /v1 usage."""
import datetime

from django.db.models import Avg, Count, Q, QuerySet, Sum

from api import services
from api.models import ApiKey, ApiUsage
from pagoda import daily
from tenants.models import Tenant


# --- API keys ---
def api_key_by_plaintext(plaintext: str) -> ApiKey | None:
    """The key row for a presented key, revoked or not (the caller tells 401 from 403); tenant and owner
    preloaded."""
    return ApiKey.objects.select_related("tenant", "owner").filter(hashed_key=services.hash_api_key(plaintext)).first()


def api_keys(tenant: Tenant) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(tenant=tenant).select_related("owner").order_by("revoked_at", "-created_at")


# --- usage ---
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
