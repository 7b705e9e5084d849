"""The api app's tables: the tenants' API keys and one usage row per /v1 call. Writes go through
api.services, reads through api.selectors."""
from django.conf import settings
from django.db import models

from tenants.models import SamplingProfile, Tenant


class ApiKey(models.Model):
    """A tenant's key for the OpenAI-compatible API. Only the SHA-256 of the key is stored.

    The plaintext is returned once by api.services.create_api_key; `prefix` (its first characters) lets
    people tell keys apart in lists. rpm/tpm limits: None = unlimited. A key may name an `owner`, a
    member of its tenant: the key's calls then count against the owner's employee budgets and show under
    their name in the ledger, and the key stops working when the owner is deactivated or leaves the
    tenant. A key without an owner is the tenant's (its calls count against tenant budgets only). Deleting the
    owner's account deletes their keys (their usage stays in the ledger).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    hashed_key = models.CharField(max_length=64, unique=True, editable=False)
    rpm_limit = models.PositiveIntegerField(null=True, blank=True, help_text="Requests per minute; empty: no limit.")
    tpm_limit = models.PositiveIntegerField(null=True, blank=True, help_text="Tokens per minute; empty: no limit.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="api_keys",
        help_text="The employee whose budgets this key's calls count against; empty: the whole tenant's key.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "tenants_apikey"  # named for the tenants app: keeping the name kept the move state-only
        ordering = ["tenant", "-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


class ApiUsage(models.Model):
    """One authenticated call of the OpenAI-compatible API (/v1): who, what, tokens, time and outcome.

    Written by api.services.record_api_usage for every call whose key was recognised, errors included
    (status_code says how it ended; 499 = the client went away mid-request). Chat replies made in the
    web UI are counted on their Message rows instead; the console reads both from the usage ledger (governance).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_usage")
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="usage")
    profile = models.ForeignKey(SamplingProfile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    endpoint = models.CharField(max_length=32, help_text="chat.completions | completions | models")
    model = models.CharField(max_length=100, blank=True, help_text="The `model` the client asked for.")
    request_id = models.CharField(max_length=64, blank=True)
    stream = models.BooleanField(default=False)
    status_code = models.PositiveSmallIntegerField()
    error_code = models.CharField(max_length=64, blank=True, help_text="The OpenAI-style error code, if any.")
    finish_reason = models.CharField(max_length=16, blank=True, help_text="stop | length | abort")
    num_prompt_tokens = models.PositiveIntegerField(default=0)
    num_cached_tokens = models.PositiveIntegerField(default=0)
    num_output_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(null=True, blank=True, help_text="From the request to its last byte.")
    time_to_first_token_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "tenants_apiusage"  # as ApiKey's table
        ordering = ["-created_at", "-id"]
        verbose_name = "API usage record"
        indexes = [
            models.Index(fields=["tenant", "created_at"], name="api_usage_tenant_idx"),
            models.Index(fields=["api_key", "created_at"], name="api_usage_key_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.endpoint} {self.model} {self.status_code}"

    @property
    def num_total_tokens(self) -> int:
        return self.num_prompt_tokens + self.num_output_tokens
