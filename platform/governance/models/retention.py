from django.core.validators import MinValueValidator
from django.db import models

from tenants.models import Tenant


class RetentionPolicy(models.Model):
    """Conversations of the tenant whose last activity is older than `retention_days` are deleted by
    `manage.py apply_retention`. No policy: kept until their owner deletes them."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="retention_policy")
    retention_days = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "retention policies"

    def __str__(self) -> str:
        return f"{self.tenant.slug}: {self.retention_days} days"
