"""API keys and usage in the admin site, scoped to the tenants a tenant admin administers."""
from django.contrib import admin, messages
from django.contrib.auth import get_user_model

from api import services
from api.models import ApiKey, ApiUsage
from tenants.models import Membership
from tenants.admin.scoping import ReadOnlyAdmin, TenantScopedAdmin, adopt


@admin.register(ApiKey)
class ApiKeyAdmin(TenantScopedAdmin):
    """Adding a key shows its plaintext once, in the confirmation message. Keys are revoked, not deleted."""

    list_display = ["name", "tenant", "owner", "prefix", "rpm_limit", "tpm_limit", "created_at", "last_used_at",
                    "revoked_at"]
    list_filter = ["tenant"]
    list_select_related = ["tenant", "owner"]
    search_fields = ["name", "prefix", "owner__username"]
    actions = ["revoke_selected"]
    readonly_fields = ["prefix", "created_by", "created_at", "last_used_at", "revoked_at"]

    def get_list_filter(self, request):
        return self.list_filter if request.user.is_superuser else []

    def get_fields(self, request, obj=None):
        base = ["tenant", "name", "owner", "rpm_limit", "tpm_limit"]
        return base if obj is None else [*base, *self.readonly_fields]

    def get_readonly_fields(self, request, obj=None):
        return [*self.readonly_fields, "tenant"] if obj else []

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "owner" and not request.user.is_superuser:
            # members of the tenants this admin runs; services.create_api_key checks the key's own tenant
            kwargs["queryset"] = get_user_model().objects.filter(
                memberships__tenant__in=self.admin_tenants(request)).distinct().order_by("username")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)

        class OwnerCheckedForm(form):
            def clean(self):
                data = super().clean()
                tenant = data.get("tenant") or (obj.tenant if obj else None)
                owner = data.get("owner")
                if owner is not None and tenant is not None and not Membership.objects.filter(
                        tenant=tenant, user=owner).exists():
                    self.add_error("owner", f"{owner.get_username()} is not a member of {tenant.slug}.")
                return data

        return OwnerCheckedForm

    def save_model(self, request, obj, form, change):
        if change:
            services.update_api_key(obj, actor=request.user, name=obj.name, rpm_limit=obj.rpm_limit,
                                    tpm_limit=obj.tpm_limit, owner=obj.owner)
            return
        key, plaintext = services.create_api_key(
            obj.tenant, obj.name, actor=request.user, rpm_limit=obj.rpm_limit, tpm_limit=obj.tpm_limit,
            owner=obj.owner,
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
