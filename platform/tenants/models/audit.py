from django.conf import settings
from django.db import models

from tenants.models.tenancy import Tenant


class AuditLog(models.Model):
    """Who changed what, when: one row per administrative change, with before/after field values.

    Rows outlive their actor and tenant (SET_NULL plus the text snapshots `actor_repr`, `object_repr`).
    """

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_repr = models.CharField(max_length=150, blank=True, help_text="Username at the time; blank: a script.")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_logs")
    action = models.CharField(max_length=64, db_index=True, help_text="e.g. system_prompt.activate")
    object_type = models.CharField(max_length=100, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    object_repr = models.CharField(max_length=200, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "audit log entry"
        verbose_name_plural = "audit log"

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_repr or 'system'} {self.action} {self.object_repr}"
