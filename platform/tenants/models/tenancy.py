from django.conf import settings
from django.core.validators import validate_slug
from django.db import models


class Tenant(models.Model):
    """A company unit with its own members, system prompt, sampling profiles, keys and usage.

    `slug` names the tenant in URLs, in the engine's pin key and as the engine's prefix-cache isolation
    key (see `engine_key`); it changes only through tenants.services.rename_tenant, which moves those.
    """

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=50, unique=True, validators=[validate_slug])
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="tenants")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def engine_key(self) -> str:
        """The `tenant` argument for engine.generate / pin_prefix: prefix-cache hits never cross it."""
        return self.slug

    @property
    def pin_key(self) -> str:
        """The engine pin key of this tenant's active system prompt."""
        return f"tenant:{self.slug}"


class Membership(models.Model):
    """A user's place in a tenant. Tenant admins manage their tenant (admin site and console)."""

    class Role(models.TextChoices):
        MEMBER = "member", "Member"
        ADMIN = "admin", "Tenant admin"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant", "user"]
        constraints = [models.UniqueConstraint(fields=["user", "tenant"], name="membership_unique_user_tenant")]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant} ({self.get_role_display()})"

    @property
    def is_admin(self) -> bool:
        return self.role == self.Role.ADMIN
