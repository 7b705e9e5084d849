from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The per-tenant admin console: prompt, profiles, members, usage and the live engine panel."""

    name = "console"
