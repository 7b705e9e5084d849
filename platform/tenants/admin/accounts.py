"""User accounts in the admin: Django's UserAdmin, plus the offboarding action (deactivate at once).

Deactivating ends the user's sessions (tenants.accounts) and closes their open chat sockets
(chat.signals), whichever way it is done: this action, the change form, or a script.
"""
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from tenants.accounts import set_actor

User = get_user_model()


class AccountAdmin(UserAdmin):
    actions = ["deactivate_users"]

    @admin.action(description="Deactivate the selected users (ends their sessions and open chats)")
    def deactivate_users(self, request, queryset) -> None:
        users = [u for u in queryset.filter(is_active=True) if u.pk != request.user.pk]
        for user in users:  # one save each: the signals that end sessions and close sockets fire per user
            set_actor(user, request.user)
            user.is_active = False
            user.save(update_fields=["is_active"])
        skipped = queryset.filter(pk=request.user.pk).exists()
        self.message_user(request, f"Deactivated {len(users)} user(s)."
                          + (" You cannot deactivate yourself." if skipped else ""),
                          messages.WARNING if skipped else messages.SUCCESS)

    def get_object(self, request, object_id, from_field=None):
        # The change form, the password form and the delete page all fetch the user here: their saves
        # and deletions are then audited with the administrator as the actor.
        user = super().get_object(request, object_id, from_field)
        if user is not None:
            set_actor(user, request.user)
        return user

    def save_model(self, request, obj, form, change):
        set_actor(obj, request.user)  # a new user too
        super().save_model(request, obj, form, change)

    def delete_queryset(self, request, queryset):
        for user in queryset:  # one by one, so that each deletion is audited with its actor
            set_actor(user, request.user)
            user.delete()


if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, AccountAdmin)
