"""Token budgets: checked and reserved before a chat turn or an API call starts.

    warning = reserve_chat(user, tenant, request_id, num_tokens)   # may raise QuotaExceeded
    warning = reserve_api(key, request_id, num_tokens)                # the key's owner's budgets too
    ... the turn or call runs; its ledger row (governance.ledger) releases the reservation.

Employee budgets count the employee's chat replies and the calls of the API keys they own
(ApiKey.owner), as their `source` says; a key without an owner counts against tenant budgets only.

Spend in a period = the ledger's prompt + output tokens since the period began + the reservations of
requests still running. A request is refused once spend has reached a budget; one that is let in
reserves its most (prompt + max_tokens), so under any burst a budget is overspent by at most the
tokens of the last request let in. The check and the reservation are one transaction holding a lock
on the budget rows (SELECT ... FOR UPDATE on PostgreSQL; on SQLite a write first, which takes the
database's write lock), so two requests never both read the spend before either reserves.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BigIntegerField, F, Func, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from governance.models import Budget, BudgetReservation, UsageRecord
from governance.periods import period_bounds
from pagoda.db import db_call
from pagoda.ttl_cache import TTLCache

WARN_FRACTION = 0.8  # the employee is told once this share of a budget is spent


class QuotaExceeded(Exception):
    """A budget is spent: `message` says which and when it resets (`resets_at`)."""

    def __init__(self, message: str, resets_at: datetime.datetime):
        super().__init__(message)
        self.message = message
        self.resets_at = resets_at


@dataclass(frozen=True)
class BudgetStatus:
    """One budget's spend in its current period."""

    budget: Budget
    num_used_tokens: int
    resets_at: datetime.datetime

    @property
    def fraction(self) -> float:
        return self.num_used_tokens / self.budget.max_tokens if self.budget.max_tokens else 1.0

    @property
    def is_spent(self) -> bool:
        return self.num_used_tokens >= self.budget.max_tokens

    def describe(self) -> str:
        whose = "Your" if self.budget.scope != Budget.Scope.TENANT else "Your organisation's"
        what = {"all": "", "chat": " chat", "api": " API"}[self.budget.source]
        period = "daily" if self.budget.period == Budget.Period.DAY else "monthly"
        return f"{whose} {period}{what} budget of {self.budget.max_tokens:,} tokens"

    def resets_text(self) -> str:
        return timezone.localtime(self.resets_at).strftime("%Y-%m-%d %H:%M %Z")


# --- which budgets apply ------------------------------------------------------------------------------
def budgets_for(tenant_id: int, user_id: int | None, source: str) -> list[Budget]:
    """The tenant's budgets counting a request of `source` (chat or api): tenant-wide ones, and, when
    an employee `user_id` makes it, theirs (a one-employee budget replaces the each-employee budget
    of the same period and source)."""
    rows = Budget.objects.filter(tenant_id=tenant_id, source__in=(Budget.Source.ALL, source))
    if user_id is None:
        return list(rows.filter(scope=Budget.Scope.TENANT))
    rows = list(rows.filter(Q(scope=Budget.Scope.TENANT) | Q(scope=Budget.Scope.MEMBER) | Q(user_id=user_id)))
    own = {(b.period, b.source) for b in rows if b.scope == Budget.Scope.USER}
    return [b for b in rows if not (b.scope == Budget.Scope.MEMBER and (b.period, b.source) in own)]


def budgets_for_chat(tenant_id: int, user_id: int) -> list[Budget]:
    return budgets_for(tenant_id, user_id, Budget.Source.CHAT)


def budgets_for_api(tenant_id: int, owner_id: int | None = None) -> list[Budget]:
    """A key's calls: the tenant's API budgets, and its owner's when it has one."""
    return budgets_for(tenant_id, owner_id, Budget.Source.API)


# --- spend ------------------------------------------------------------------------------------------
def _reservation_ttl() -> datetime.timedelta:
    return datetime.timedelta(seconds=settings.PAGODA_CHAT_STALE_REPLY_SECONDS)


def _scoped(rows: QuerySet, budget: Budget, user_id: int | None, since: datetime.datetime) -> QuerySet:
    rows = rows.filter(tenant_id=budget.tenant_id)
    if budget.source != Budget.Source.ALL:
        rows = rows.filter(source=budget.source)
    if budget.scope != Budget.Scope.TENANT:
        rows = rows.filter(user_id=budget.user_id if budget.scope == Budget.Scope.USER else user_id)
    return rows.filter(created_at__gte=since)


def status(budget: Budget, user_id: int | None = None, now: datetime.datetime | None = None) -> BudgetStatus:
    """The budget's spend now: ledger rows of its period plus live reservations. `user_id` is the
    employee an each-employee budget is read for."""
    now = now or timezone.now()
    start, end = period_bounds(budget.period, now)
    used = _total(_scoped(UsageRecord.objects.all(), budget, user_id, start),
                  F("num_prompt_tokens") + F("num_output_tokens"))
    reserved = _total(_scoped(BudgetReservation.objects.all(), budget, user_id, max(start, now - _reservation_ttl())),
                      F("num_tokens"))
    # One statement, so one snapshot: read as two, a request finishing in between (its ledger row
    # written and its reservation deleted, together) would be in neither sum on PostgreSQL, and the
    # budget would let one request too many in.
    row = Budget.objects.filter(pk=budget.pk).values_list(used + reserved).first()
    return BudgetStatus(budget, row[0] if row else 0, end)


def _total(rows: QuerySet, tokens) -> Coalesce:
    """SUM(tokens) over `rows` as a scalar subquery, 0 over none."""
    total = rows.order_by().annotate(n=Func(tokens, function="SUM", output_field=BigIntegerField())).values("n")
    return Coalesce(Subquery(total), 0, output_field=BigIntegerField())


# --- reserving ----------------------------------------------------------------------------------------
def reserve_chat(user, tenant, request_id: str, num_tokens: int) -> BudgetStatus | None:
    """Check the employee's chat budgets and reserve `num_tokens` for `request_id`.

    Returns the budget past WARN_FRACTION to warn about (the most spent), else None. Raises
    QuotaExceeded when one is spent.
    """
    return _reserve(budgets_for_chat(tenant.pk, user.pk), tenant.pk, user.pk, UsageRecord.Source.CHAT,
                    request_id, num_tokens)


def reserve_api(key, request_id: str, num_tokens: int) -> BudgetStatus | None:
    """As reserve_chat, for a /v1 call of `key` against its tenant's API budgets and, for a key with an
    owner, the owner's."""
    return _reserve(budgets_for_api(key.tenant_id, key.owner_id), key.tenant_id, key.owner_id, UsageRecord.Source.API,
                    request_id, num_tokens)


_HAS_API_BUDGETS = TTLCache("api budgets")  # (tenant id, owner id) -> whether any budget counts the key's calls


async def areserve_api(key, request_id: str, num_tokens: int) -> BudgetStatus | None:
    """reserve_api for async code. A key no budget counts (known from this process's cache,
    pagoda.ttl_cache) reserves nothing and costs no database call; otherwise it reserves as
    reserve_api does, in one transaction."""
    tenant_id, owner_id = key.tenant_id, key.owner_id
    if not await _HAS_API_BUDGETS.aget((tenant_id, owner_id), lambda: bool(budgets_for_api(tenant_id, owner_id))):
        return None
    return await db_call(reserve_api)(key, request_id, num_tokens)


def _reserve(budgets: list[Budget], tenant_id: int, user_id: int | None, source: str, request_id: str,
             num_tokens: int) -> BudgetStatus | None:
    if not budgets:
        return None
    with transaction.atomic():
        _lock(budgets)
        now = timezone.now()
        statuses = [status(b, user_id, now) for b in budgets]
        spent = [s for s in statuses if s.is_spent]
        if spent:
            last = max(spent, key=lambda s: s.resets_at)  # the one that holds the request back longest
            raise QuotaExceeded(f"{last.describe()} is used up ({last.num_used_tokens:,} tokens); "
                                f"it resets at {last.resets_text()}.", last.resets_at)
        BudgetReservation.objects.create(tenant_id=tenant_id, user_id=user_id, source=source,
                                         request_id=request_id[:64], num_tokens=max(0, num_tokens), created_at=now)
    worst = max(statuses, key=lambda s: s.fraction)
    return worst if worst.fraction >= WARN_FRACTION else None


def _lock(budgets: list[Budget]) -> None:
    """Hold the budgets until the transaction ends, so each request reads the spend after the last one
    reserved. A write must come first on SQLite: a transaction that reads first and writes later fails
    with "database is locked" instead of waiting when another one wrote meanwhile."""
    ids = sorted(b.pk for b in budgets)
    if connection.vendor == "sqlite":
        Budget.objects.filter(pk__in=ids).update(max_tokens=F("max_tokens"))
    else:
        list(Budget.objects.select_for_update().filter(pk__in=ids).order_by("pk").values_list("pk", flat=True))


def release(request_id: str) -> None:
    """Forget a reservation whose request never ran (its ledger row does this for those that did)."""
    BudgetReservation.objects.filter(request_id=request_id[:64]).delete()


def warning_fields(warning: BudgetStatus) -> dict:
    """What the chat's budget_warning frame says about a budget past WARN_FRACTION."""
    return {"message": f"{warning.describe()} is {warning.fraction:.0%} used; it resets at {warning.resets_text()}.",
            "used_tokens": warning.num_used_tokens, "max_tokens": warning.budget.max_tokens,
            "resets_at": warning.resets_at.isoformat()}
