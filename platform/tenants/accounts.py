"""User accounts: what changed in a save, deactivation ending the user's sessions, and the audit log
of account changes (user.create, user.deactivate, user.activate, user.update, user.password_change,
user.delete).

Accounts are django.contrib.auth's users, changed from the admin site, management commands or a
shell; model signals catch every one of those paths. A pre_save receiver remembers the fields that
decide access before the save, so post_save receivers (here and in chat.signals) can ask
`account_changed(user, "is_active")`. The admin names who made the change with `set_actor(user, actor)`
before saving; without it the log says a script did.
"""
from __future__ import annotations

from importlib import import_module

from django.conf import settings
from django.contrib.auth import SESSION_KEY, get_user_model
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver
from django.utils import timezone

from tenants import audit

# Saved with a login (last_login) or nothing that decides access: no query before such a save.
_ACCESS_FIELDS = ("is_active", "password", "is_staff", "is_superuser")
_BEFORE_ATTR = "_pagoda_access_before"
_ACTOR_ATTR = "_pagoda_actor"
# Session backends whose sessions can be listed (a cache backend's cannot: its sessions of an
# inactive user are refused at their next request anyway, the auth backend checks is_active).
_LISTABLE_SESSION_ENGINES = ("django.contrib.sessions.backends.db", "django.contrib.sessions.backends.cached_db")


def account_changed(user, field: str) -> bool:
    """Whether the save being signalled changed `field` (one of is_active, password, is_staff,
    is_superuser) of an existing user; False for a new user."""
    before = getattr(user, _BEFORE_ATTR, None)
    return before is not None and before.get(field) != getattr(user, field)


def set_actor(user, actor) -> None:
    """Name who is changing `user` in the audit entries of its next save or delete."""
    setattr(user, _ACTOR_ATTR, actor)


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


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="tenants.accounts.account_saved")
def _account_saved(sender, instance, created=False, raw=False, **kwargs) -> None:
    if raw:
        return
    actor = getattr(instance, _ACTOR_ATTR, None)
    if created:
        audit.record("user.create", actor=actor, instance=instance, after=_access_snapshot(instance))
        return
    if was_deactivated(instance):
        num_sessions = end_sessions(instance.pk)
        audit.record("user.deactivate", actor=actor, instance=instance, after={"num_sessions_ended": num_sessions})
    elif account_changed(instance, "is_active"):
        audit.record("user.activate", actor=actor, instance=instance)
    if account_changed(instance, "password"):
        audit.record("user.password_change", actor=actor, instance=instance)  # never the hash
    before = getattr(instance, _BEFORE_ATTR, None)
    roles = ("is_staff", "is_superuser")
    if before is not None and any(account_changed(instance, f) for f in roles):
        audit.record("user.update", actor=actor, instance=instance, before={f: before[f] for f in roles},
                     after={f: getattr(instance, f) for f in roles})


@receiver(post_delete, sender=settings.AUTH_USER_MODEL, dispatch_uid="tenants.accounts.account_deleted")
def _account_deleted(sender, instance, **kwargs) -> None:
    audit.record("user.delete", actor=getattr(instance, _ACTOR_ATTR, None), instance=instance,
                 before=_access_snapshot(instance))


def _access_snapshot(user) -> dict:
    return {"username": user.get_username(), **{f: getattr(user, f) for f in _ACCESS_FIELDS if f != "password"}}
