"""API keys and usage in the admin site, scoped to the tenants a tenant admin administers."""
from django.contrib import admin, messages

from api import services
from api.models import ApiKey, ApiUsage
from tenants.admin.scoping import ReadOnlyAdmin, TenantScopedAdmin, adopt


@admin.register(ApiKey)
class ApiKeyAdmin(TenantScopedAdmin):
    """Adding a key shows its plaintext once, in the confirmation message. Keys are revoked, not deleted."""

    list_display = ["name", "tenant", "prefix", "rpm_limit", "tpm_limit", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["tenant"]
    list_select_related = ["tenant"]
    search_fields = ["name", "prefix"]
    actions = ["revoke_selected"]
    readonly_fields = ["prefix", "created_by", "created_at", "last_used_at", "revoked_at"]

    def get_list_filter(self, request):
        return self.list_filter if request.user.is_superuser else []

    def get_fields(self, request, obj=None):
        base = ["tenant", "name", "rpm_limit", "tpm_limit"]
        return base if obj is None else [*base, *self.readonly_fields]

    def get_readonly_fields(self, request, obj=None):
        return [*self.readonly_fields, "tenant"] if obj else []

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj, form, change):
        if change:
            services.update_api_key(
                obj, actor=request.user, name=obj.name, rpm_limit=obj.rpm_limit, tpm_limit=obj.tpm_limit
            )
            return
        key, plaintext = services.create_api_key(
            obj.tenant, obj.name, actor=request.user, rpm_limit=obj.rpm_limit, tpm_limit=obj.tpm_limit
        )
        adopt(obj, key)
        self.message_user(
            request, f"API key for {key.tenant}: {plaintext} — copy it now, it will not be shown again.", messages.WARNING
        )

    @admin.action(description="Revoke the selected keys")
    def revoke_selected(self, request, queryset):
        for key in queryset:
            services.revoke_api_key(key, actor=request.user)
        self.message_user(request, f"Revoked {queryset.count()} key(s).")



@admin.register(ApiUsage)
class ApiUsageAdmin(ReadOnlyAdmin):
    """One row per /v1 call (written by the api app): who, what, tokens, latency and how it ended."""

    list_display = ["created_at", "tenant", "api_key", "endpoint", "model", "status_code", "num_prompt_tokens",
                    "num_cached_tokens", "num_output_tokens", "latency_ms"]
    list_filter = ["endpoint", "status_code", "tenant"]
    list_select_related = ["tenant", "api_key"]
    search_fields = ["request_id", "model", "api_key__name", "api_key__prefix"]
    date_hierarchy = "created_at"

    def get_list_filter(self, request):
        return self.list_filter if request.user.is_superuser else ["endpoint", "status_code"]
