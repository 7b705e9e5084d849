"""The tables single sign-on owns: which directory group gives which tenant membership, and which
OpenID Connect subject is which local user."""
from django.conf import settings
from django.db import models

from tenants.models import Membership, Tenant


class Source(models.TextChoices):
    """Where a login, and the group names it carries, came from."""

    OIDC = "oidc", "OpenID Connect"
    LDAP = "ldap", "LDAP / Active Directory"


class GroupMapping(models.Model):
    """Members of directory group `group` (seen at a `source` login) belong to `tenant` with `role`.

    A tenant named by any mapping of a source is managed by that source: at each login from it, the
    user's membership of that tenant becomes exactly what their groups map to (the highest role when
    several groups map to it), or is removed when none does. Tenants no mapping names are left to
    the administrators. Group names compare case-insensitively (LDAP DNs are).
    """

    source = models.CharField(max_length=8, choices=Source.choices)
    group = models.CharField(
        max_length=400,
        help_text="LDAP: the group's DN (cn=sales,ou=groups,dc=example,dc=com). OpenID Connect: a value of "
                  "the groups claim (a group name, or an object id for Entra ID).")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="sso_group_mappings")
    role = models.CharField(max_length=16, choices=Membership.Role.choices, default=Membership.Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["source", "group", "tenant"]
        constraints = [models.UniqueConstraint(fields=["source", "group", "tenant"], name="sso_mapping_unique")]

    def __str__(self) -> str:
        return f"{self.get_source_display()} {self.group} -> {self.tenant} ({self.get_role_display()})"


class ExternalIdentity(models.Model):
    """The local user an OpenID Connect subject (`issuer`, `subject`) logs in as: made at the first
    login, so a later login finds the user even after a rename, and never by e-mail address alone."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identities")
    issuer = models.CharField(max_length=400)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    last_login_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "external identities"
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique")]

    def __str__(self) -> str:
        return f"{self.user} = {self.subject} at {self.issuer}"
