"""The group mappings and external identities in the admin site: superusers (and staff given the
permissions) edit them; tenant admins do not see them, since a mapping grants access to any tenant."""
from django.contrib import admin

from sso import services
from sso.models import ExternalIdentity, GroupMapping


@admin.register(GroupMapping)
class GroupMappingAdmin(admin.ModelAdmin):
    list_display = ("group", "source", "tenant", "role", "created_at")
    list_filter = ("source", "role", "tenant")
    search_fields = ("group", "tenant__name", "tenant__slug")

    def save_model(self, request, obj, form, change) -> None:
        services.save_mapping(obj, actor=request.user)

    def delete_model(self, request, obj) -> None:
        services.delete_mapping(obj, actor=request.user)

    def delete_queryset(self, request, queryset) -> None:
        for mapping in queryset:
            services.delete_mapping(mapping, actor=request.user)


@admin.register(ExternalIdentity)
class ExternalIdentityAdmin(admin.ModelAdmin):
    """Read-only: identities are made by logins; deleting one makes the next login create a new user."""

    list_display = ("user", "subject", "issuer", "last_login_at")
    search_fields = ("user__username", "subject")
    readonly_fields = ("user", "issuer", "subject", "created_at", "last_login_at")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
