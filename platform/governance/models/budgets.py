from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from tenants.models import Tenant


class Budget(models.Model):
    """At most `max_tokens` (prompt + output) per day or per calendar month (TIME_ZONE).

    scope tenant: the whole tenant together (chat, API or both, `source`); scope member: each employee
    of the tenant on their own; scope user: one employee, in place of the member budget of the same
    period and source. Employee budgets count the employee's chat replies and the calls of the API keys
    they own (api.ApiKey.owner), as `source` says; calls of keys without an owner count only against
    tenant budgets.
    """

    class Scope(models.TextChoices):
        TENANT = "tenant", "Whole tenant"
        MEMBER = "member", "Each employee"
        USER = "user", "One employee"

    class Period(models.TextChoices):
        DAY = "day", "Per day"
        MONTH = "month", "Per month"

    class Source(models.TextChoices):
        ALL = "all", "Chat and API"
        CHAT = "chat", "Chat"
        API = "api", "API"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="budgets")
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.TENANT)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="budgets", help_text="Only for scope 'One employee'.")
    period = models.CharField(max_length=8, choices=Period.choices)
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.ALL)
    max_tokens = models.PositiveBigIntegerField(help_text="Prompt plus output tokens.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant", "scope", "period", "source"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "scope", "period", "source"], condition=models.Q(user=None),
                                    name="budget_unique_shared"),
            models.UniqueConstraint(fields=["tenant", "user", "period", "source"], condition=~models.Q(user=None),
                                    name="budget_unique_user"),
        ]

    def __str__(self) -> str:
        who = self.user.get_username() if self.user_id else self.get_scope_display().lower()
        return f"{self.tenant.slug}: {who}, {self.get_source_display().lower()}, {self.max_tokens:,} tokens {self.get_period_display().lower()}"

    def clean(self) -> None:
        if (self.scope == self.Scope.USER) != (self.user_id is not None):
            raise ValidationError({"user": "Pick the employee for a one-employee budget, and only then."})


class BudgetReservation(models.Model):
    """Tokens a running turn or call may still spend: counted as spent until its ledger row replaces
    it (same request_id), or until it is older than PAGODA_CHAT_STALE_REPLY_SECONDS (its process died)."""

    tenant_id = models.BigIntegerField()
    user_id = models.BigIntegerField(null=True, blank=True)
    source = models.CharField(max_length=8)
    request_id = models.CharField(max_length=64, unique=True)
    num_tokens = models.PositiveIntegerField()
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        indexes = [models.Index(fields=["tenant_id", "created_at"], name="reservation_tenant_idx")]
