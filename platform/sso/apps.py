from django.apps import AppConfig


class SsoConfig(AppConfig):
    """Single sign-on: OpenID Connect and LDAP / Active Directory logins, and the mapping from directory
    groups to tenant memberships that every such login re-applies (see sso.mapping)."""

    name = "sso"
    verbose_name = "Single sign-on"
    default_auto_field = "django.db.models.BigAutoField"
