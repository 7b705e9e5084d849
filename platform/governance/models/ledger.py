from django.db import models
from django.utils import timezone


class AppendOnlyError(Exception):
    """A ledger row was about to be changed or deleted one by one."""


class UsageRecord(models.Model):
    """One chat reply or one /v1 call: who, what, tokens, timings and how it ended. Append-only.

    Ids are plain values, names copied beside them: the row must survive the deletion of its
    conversation (retention, an employee erasing their data), its API key, its user and its tenant,
    because chargeback is read from here. Written only by governance.ledger.
    """

    class Source(models.TextChoices):
        CHAT = "chat", "Chat"
        API = "api", "API"

    source = models.CharField(max_length=8, choices=Source.choices)
    tenant_id = models.BigIntegerField()
    tenant_slug = models.CharField(max_length=50)
    user_id = models.BigIntegerField(null=True, blank=True, help_text="The employee (chat replies; API calls of a key they own).")
    username = models.CharField(max_length=150, blank=True)
    api_key_id = models.BigIntegerField(null=True, blank=True, help_text="The key (API calls).")
    api_key_name = models.CharField(max_length=100, blank=True)
    profile_name = models.CharField(max_length=64, blank=True)
    endpoint = models.CharField(max_length=32, blank=True, help_text="chat | chat.completions | completions | models")
    conversation_id = models.BigIntegerField(null=True, blank=True)
    message_id = models.BigIntegerField(null=True, blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=16, help_text="complete | stopped | error")
    status_code = models.PositiveSmallIntegerField(null=True, blank=True, help_text="HTTP status (API calls).")
    error_code = models.CharField(max_length=64, blank=True)
    finish_reason = models.CharField(max_length=16, blank=True)
    num_prompt_tokens = models.PositiveIntegerField(default=0)
    num_cached_tokens = models.PositiveIntegerField(default=0)
    num_output_tokens = models.PositiveIntegerField(default=0)
    time_to_first_token_ms = models.PositiveIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "usage record"
        indexes = [
            models.Index(fields=["tenant_id", "created_at"], name="ledger_tenant_idx"),
            models.Index(fields=["tenant_id", "user_id", "created_at"], name="ledger_tenant_user_idx"),
        ]
        constraints = [  # a reply's save is retried: its second write must not count it twice
            models.UniqueConstraint(fields=["request_id"], condition=~models.Q(request_id=""),
                                    name="ledger_unique_request"),
        ]

    def __str__(self) -> str:
        return f"{self.source} {self.tenant_slug} {self.num_total_tokens} tokens {self.status}"

    @property
    def num_total_tokens(self) -> int:
        return self.num_prompt_tokens + self.num_output_tokens

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError("usage records are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("usage records are append-only")
