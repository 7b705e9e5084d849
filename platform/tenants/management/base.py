"""Shared helpers for the management commands (of the tenants app and the apps built on it)."""
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from tenants.models import Tenant


def get_tenant(slug: str) -> Tenant:
    try:
        return Tenant.objects.get(slug=slug)
    except Tenant.DoesNotExist:
        raise CommandError(f"no tenant with slug {slug!r}") from None


def validation_message(exc: ValidationError) -> str:
    """A ValidationError as one line: 'field: message; other: message'."""
    if hasattr(exc, "message_dict"):
        return "; ".join(f"{field}: {' '.join(msgs)}" if field != "__all__" else " ".join(msgs)
                         for field, msgs in exc.message_dict.items())
    return " ".join(exc.messages)
