from django.conf import settings
from django.db import models

from tenants.models.tenancy import Tenant


class SystemPrompt(models.Model):
    """One version of a tenant's system prompt. Versions are never edited: every save is a new row.

    At most one version per tenant is active (a partial unique index); the active one is applied
    server-side to every chat and API request of the tenant and pinned in the engine's prefix cache.
    Rolling back activates an older version.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="system_prompts")
    version = models.PositiveIntegerField()
    text = models.TextField()
    # Tokens of the rendered system turn (engine.encode_system_prefix); None until an engine counted it.
    num_tokens = models.PositiveIntegerField(null=True, blank=True)
    is_active = models.BooleanField(default=False)
    note = models.CharField(max_length=200, blank=True, help_text="What changed in this version.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "version"], name="system_prompt_unique_version"),
            # is_active is among the fields (redundant under the condition) so that form validation can
            # skip this rule: services.activate_system_prompt moves the flag instead.
            models.UniqueConstraint(
                fields=["tenant", "is_active"],
                condition=models.Q(is_active=True),
                name="system_prompt_one_active_per_tenant",
            ),
        ]

    def validate_constraints(self, exclude=None) -> None:
        super().validate_constraints(exclude={*(exclude or ()), "is_active"})

    def __str__(self) -> str:
        state = "active" if self.is_active else "inactive"
        return f"{self.tenant.slug} v{self.version} ({state})"
