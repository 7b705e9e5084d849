"""Reads of the ledger and of budgets: the console's usage tables, spend against budget, exports."""
from __future__ import annotations

import datetime

from django.db.models import Avg, Count, F, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from governance import budgets as budget_rules
from governance.models import Budget, UsageRecord
from api.models import ApiKey
from tenants.models import Membership, Tenant


def ledger(tenant_id: int, start: datetime.datetime | None = None, end: datetime.datetime | None = None) -> QuerySet:
    """The tenant's ledger rows in [start, end), oldest first."""
    rows = UsageRecord.objects.filter(tenant_id=tenant_id)
    if start is not None:
        rows = rows.filter(created_at__gte=start)
    if end is not None:
        rows = rows.filter(created_at__lt=end)
    return rows.order_by("created_at", "id")


def totals(rows: QuerySet) -> dict:
    """{"num_records", "prompt_tokens", "cached_tokens", "output_tokens", "total_tokens"} of `rows`."""
    sums = rows.aggregate(num_records=Count("id"), prompt_tokens=Sum("num_prompt_tokens"),
                          cached_tokens=Sum("num_cached_tokens"), output_tokens=Sum("num_output_tokens"))
    out = {key: value or 0 for key, value in sums.items()}
    out["total_tokens"] = out["prompt_tokens"] + out["output_tokens"]
    return out


def usage_overview(tenant: Tenant, *, days: int = 14, today: datetime.date | None = None) -> list[dict]:
    """Chat replies and API calls per local day, oldest first, zeros included: the console's table.

    Rows: {"day", "num_replies", "num_api_requests", "prompt_tokens", "cached_tokens", "output_tokens",
    "total_tokens", "api_tokens"}.
    """
    today = today or timezone.localdate()
    first = today - datetime.timedelta(days=days - 1)
    since = timezone.make_aware(datetime.datetime.combine(first, datetime.time.min))
    api = Q(source=UsageRecord.Source.API)
    per_day = (
        ledger(tenant.pk, since)
        .annotate(day=TruncDate("created_at", tzinfo=timezone.get_current_timezone()))
        .values("day")
        .annotate(num_replies=Count("id", filter=~api), num_api_requests=Count("id", filter=api),
                  prompt_tokens=Sum("num_prompt_tokens"), cached_tokens=Sum("num_cached_tokens"),
                  output_tokens=Sum("num_output_tokens"),
                  api_tokens=Sum(F("num_prompt_tokens") + F("num_output_tokens"), filter=api))
        .order_by("day")
    )
    by_day = {row["day"]: row for row in per_day}
    result = []
    for offset in range(days):
        day = first + datetime.timedelta(days=offset)
        row = {key: value or 0 for key, value in by_day.get(day, {}).items() if key != "day"}
        prompt, output = row.get("prompt_tokens", 0), row.get("output_tokens", 0)
        result.append({"day": day, "num_replies": row.get("num_replies", 0),
                       "num_api_requests": row.get("num_api_requests", 0), "prompt_tokens": prompt,
                       "cached_tokens": row.get("cached_tokens", 0), "output_tokens": output,
                       "total_tokens": prompt + output, "api_tokens": row.get("api_tokens", 0)})
    return result


def api_usage_by_key(tenant: Tenant, *, days: int = 14) -> list[dict]:
    """Per API key over the last `days`: {"key" (ApiKey, or None once deleted), "key_name", "num_requests",
    "num_errors", "total_tokens", "avg_latency_ms"}, busiest first."""
    since = timezone.now() - datetime.timedelta(days=days)
    rows = (
        ledger(tenant.pk, since).filter(source=UsageRecord.Source.API, api_key_id__isnull=False)
        .values("api_key_id", "api_key_name")
        .annotate(num_requests=Count("id"), num_errors=Count("id", filter=Q(status_code__gte=400)),
                  total_tokens=Sum(F("num_prompt_tokens") + F("num_output_tokens")), avg_latency_ms=Avg("duration_ms"))
        .order_by("-num_requests")
    )
    keys = ApiKey.objects.in_bulk([row["api_key_id"] for row in rows])
    return [{"key": keys.get(row["api_key_id"]), "key_name": row["api_key_name"],
             "num_requests": row["num_requests"], "num_errors": row["num_errors"],
             "total_tokens": row["total_tokens"] or 0,
             "avg_latency_ms": round(row["avg_latency_ms"]) if row["avg_latency_ms"] is not None else None}
            for row in rows]


def budgets(tenant: Tenant) -> QuerySet[Budget]:
    return Budget.objects.filter(tenant=tenant).select_related("user").order_by("scope", "period", "source", "user_id")


def spend_against_budgets(tenant: Tenant) -> list[dict]:
    """What the console shows: each budget with its spend now. An each-employee budget gets one row
    per member ({"budget", "username", "status"}); status is a budgets.BudgetStatus."""
    rows = []
    members = list(Membership.objects.filter(tenant=tenant).select_related("user").order_by("user__username"))
    for budget in budgets(tenant):
        if budget.scope == Budget.Scope.MEMBER:
            for m in members:
                rows.append({"budget": budget, "username": m.user.get_username(),
                             "status": budget_rules.status(budget, m.user_id)})
        else:
            rows.append({"budget": budget, "username": budget.user.get_username() if budget.user else "",
                         "status": budget_rules.status(budget)})
    return rows
