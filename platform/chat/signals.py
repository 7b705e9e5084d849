"""Offboarding that reaches open chat sockets: the changes that may end a user's access, announced to
their sockets (chat.revocation) once the change commits. Connected by ChatConfig.ready().

    logout                      -> the sockets of that session close
    deactivation, a password    -> the user's sockets check their session and close (deactivation also
    change, deletion               ends the sessions: tenants.accounts)
    membership deleted          -> the user's sockets check and close those in that tenant
    tenant deactivated/deleted  -> the sockets on the tenant's conversations check and close
"""
from __future__ import annotations

from functools import partial

from django.conf import settings
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver

from chat import revocation
from tenants.accounts import account_changed
from tenants.models import Membership, Tenant


def _after_commit(function, *args, **kwargs) -> None:
    # robust: a failed announcement is logged by revocation and must never undo or fail the change
    transaction.on_commit(partial(function, *args, **kwargs), robust=True)


@receiver(user_logged_out, dispatch_uid="chat.signals.logged_out")
def _logged_out(sender, request=None, user=None, **kwargs) -> None:
    session = getattr(request, "session", None)
    if user is None or session is None or not session.session_key:
        return
    _after_commit(revocation.user_access_changed, user.pk, "logout", session_key=session.session_key)


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="chat.signals.account_saved")
def _account_saved(sender, instance, created=False, raw=False, **kwargs) -> None:
    if raw or created:
        return
    for field, reason in (("is_active", "deactivated"), ("password", "password")):
        if account_changed(instance, field):
            _after_commit(revocation.user_access_changed, instance.pk, reason)
            return


@receiver(post_delete, sender=settings.AUTH_USER_MODEL, dispatch_uid="chat.signals.account_deleted")
def _account_deleted(sender, instance, **kwargs) -> None:
    _after_commit(revocation.user_access_changed, instance.pk, "deleted")


@receiver(post_delete, sender=Membership, dispatch_uid="chat.signals.membership_deleted")
def _membership_deleted(sender, instance, **kwargs) -> None:
    _after_commit(revocation.user_access_changed, instance.user_id, "membership")


@receiver(pre_save, sender=Tenant, dispatch_uid="chat.signals.tenant_saving")
def _tenant_saving(sender, instance, raw=False, **kwargs) -> None:
    was_active = None
    if not raw and instance.pk is not None:
        was_active = Tenant.objects.filter(pk=instance.pk).values_list("is_active", flat=True).first()
    instance._pagoda_was_active = was_active


@receiver(post_save, sender=Tenant, dispatch_uid="chat.signals.tenant_saved")
def _tenant_saved(sender, instance, created=False, raw=False, **kwargs) -> None:
    if not raw and not created and getattr(instance, "_pagoda_was_active", None) and not instance.is_active:
        _after_commit(revocation.tenant_access_changed, instance.pk, "tenant")


@receiver(post_delete, sender=Tenant, dispatch_uid="chat.signals.tenant_deleted")
def _tenant_deleted(sender, instance, **kwargs) -> None:
    _after_commit(revocation.tenant_access_changed, instance.pk, "tenant")
