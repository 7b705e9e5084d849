"""Invitations in the admin site: listed (superusers: all; tenant admins: their tenants'), withdrawn by
deleting; made in the console, where the link is shown."""
from django.contrib import admin

from people import services
from people.models import Invitation
from tenants.admin.scoping import ReadOnlyAdmin


@admin.register(Invitation)
class InvitationAdmin(ReadOnlyAdmin):
    list_display = ["tenant", "email", "username", "role", "created_by", "created_at", "expires_at", "accepted_at",
                    "accepted_by"]
    list_filter = ["role", "tenant"]
    list_select_related = ["tenant", "created_by", "accepted_by"]
    search_fields = ["email", "username"]
    exclude = ["token_hash"]

    def get_list_filter(self, request):
        return self.list_filter if request.user.is_superuser else ["role"]

    def has_delete_permission(self, request, obj=None) -> bool:
        return self._allowed(request, obj, True)

    def delete_model(self, request, obj):
        services.revoke(obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        for invitation in queryset:
            services.revoke(invitation, actor=request.user)
