"""User accounts: what changed in a save, and deactivation ending the user's sessions.

Accounts are django.contrib.auth's users, changed from the admin site, management commands or a
shell; model signals catch every one of those paths. A pre_save receiver remembers the fields that
decide access before the save, so post_save receivers (here and in chat.signals) can ask
`account_changed(user, "is_active")`.
"""
from __future__ import annotations

from importlib import import_module

from django.conf import settings
from django.contrib.auth import SESSION_KEY, get_user_model
from django.db.models.signals import post_save, pre_save
from django.dispatch import receiver
from django.utils import timezone

# Saved with a login (last_login) or nothing that decides access: no query before such a save.
_ACCESS_FIELDS = ("is_active", "password", "is_staff", "is_superuser")
_BEFORE_ATTR = "_pagoda_access_before"
# Session backends whose sessions can be listed (a cache backend's cannot: its sessions of an
# inactive user are refused at their next request anyway, the auth backend checks is_active).
_LISTABLE_SESSION_ENGINES = ("django.contrib.sessions.backends.db", "django.contrib.sessions.backends.cached_db")


def account_changed(user, field: str) -> bool:
    """Whether the save being signalled changed `field` (one of is_active, password, is_staff,
    is_superuser) of an existing user; False for a new user."""
    before = getattr(user, _BEFORE_ATTR, None)
    return before is not None and before.get(field) != getattr(user, field)


def was_deactivated(user) -> bool:
    return account_changed(user, "is_active") and not user.is_active


def end_sessions(user_id: int) -> int:
    """Delete every session that logs in the user `user_id`; returns how many.

    Sessions carry their user only inside their encoded data, so the unexpired ones are decoded one
    by one: a deactivation is rare, and this keeps sessions in Django's own table.
    """
    if settings.SESSION_ENGINE not in _LISTABLE_SESSION_ENGINES:
        return 0
    from django.contrib.sessions.models import Session

    store_class = import_module(settings.SESSION_ENGINE).SessionStore
    store = store_class()
    keys = [s.session_key for s in Session.objects.filter(expire_date__gt=timezone.now()).iterator()
            if str(s.get_decoded().get(SESSION_KEY)) == str(user_id)]
    for key in keys:
        store.delete(key)  # the cached_db backend drops its cached copy too
    return len(keys)


@receiver(pre_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="tenants.accounts.remember_access_fields")
def _remember_access_fields(sender, instance, update_fields=None, raw=False, **kwargs) -> None:
    if raw or instance.pk is None:
        return
    if update_fields is not None and not set(update_fields) & set(_ACCESS_FIELDS):
        setattr(instance, _BEFORE_ATTR, None)
        return
    before = get_user_model().objects.filter(pk=instance.pk).values(*_ACCESS_FIELDS).first()
    setattr(instance, _BEFORE_ATTR, before)


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="tenants.accounts.end_sessions_of_deactivated")
def _end_sessions_of_deactivated(sender, instance, created=False, raw=False, **kwargs) -> None:
    if raw or created:
        return
    if was_deactivated(instance):
        end_sessions(instance.pk)
