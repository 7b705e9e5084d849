"""The people app's table: invitations to a tenant. Memberships themselves belong to the tenants app."""
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from tenants.models import Membership, Tenant


class Invitation(models.Model):
    """A membership reserved by a tenant admin for someone they name by e-mail and/or username.

    It is taken up in one of two ways: the person opens the invitation link (its token is shown once,
    only its SHA-256 is stored) and joins with a new or their existing account; or, for single sign-on
    users, it applies at their next directory or OpenID Connect sign-in whose e-mail or username
    matches. Either way once: `accepted_at` is then set. Expired or used invitations do nothing.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(blank=True)
    username = models.CharField(max_length=150, blank=True)
    role = models.CharField(max_length=16, choices=Membership.Role.choices, default=Membership.Role.MEMBER)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    expires_at = models.DateTimeField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")

    class Meta:
        ordering = ["tenant", "-created_at"]
        indexes = [models.Index(fields=["tenant", "accepted_at"], name="invitation_tenant_open_idx")]

    def __str__(self) -> str:
        return f"{self.email or self.username} to {self.tenant.slug} ({self.get_role_display()})"

    def clean(self) -> None:
        if not (self.email or self.username):
            raise ValidationError("Give the person's e-mail address, their username, or both.")

    @property
    def is_open(self) -> bool:
        """Neither accepted nor expired."""
        return self.accepted_at is None and self.expires_at > timezone.now()
