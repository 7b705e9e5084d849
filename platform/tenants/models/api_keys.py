from django.conf import settings
from django.db import models

from tenants.models.tenancy import Tenant


class ApiKey(models.Model):
    """A tenant's key for the OpenAI-compatible API. Only the SHA-256 of the key is stored.

    The plaintext is returned once by services.create_api_key; `prefix` (its first characters) lets
    people tell keys apart in lists. rpm/tpm limits: None = unlimited.
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
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["tenant", "-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None
