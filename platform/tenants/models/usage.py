from django.db import models

from tenants.models.api_keys import ApiKey
from tenants.models.profiles import SamplingProfile
from tenants.models.tenancy import Tenant


class ApiUsage(models.Model):
    """One authenticated call of the OpenAI-compatible API (/v1): who, what, tokens, time and outcome.

    Written by services.record_api_usage for every call whose key was recognised, errors included
    (status_code says how it ended; 499 = the client went away mid-request). Chat replies made in the
    web UI are counted on their Message rows instead; selectors.usage_overview adds both up.
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
