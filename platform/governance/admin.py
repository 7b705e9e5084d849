"""Admin: budgets and retention per tenant (tenant admins see their tenants' only); the ledger read-only."""
from django.contrib import admin

from governance import services
from governance.models import Budget, RetentionPolicy, UsageRecord
from tenants import selectors as tenant_selectors
from tenants.admin.scoping import TenantScopedAdmin, adopt


@admin.register(Budget)
class BudgetAdmin(TenantScopedAdmin):
    list_display = ("tenant", "scope", "user", "period", "source", "max_tokens", "updated_at")
    list_filter = ("scope", "period", "source")

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "user" and not request.user.is_superuser:  # never another tenant's people
            kwargs["queryset"] = tenant_selectors.users_a_tenant_admin_may_add(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request, obj, form, change):
        adopt(obj, services.set_budget(obj.tenant, scope=obj.scope, user=obj.user, period=obj.period,
                                       source=obj.source, max_tokens=obj.max_tokens, actor=request.user))

    def delete_model(self, request, obj):
        services.delete_budget(obj, actor=request.user)


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(TenantScopedAdmin):
    list_display = ("tenant", "retention_days", "updated_at")


@admin.register(UsageRecord)
class UsageRecordAdmin(admin.ModelAdmin):
    """The ledger, read-only: append-only rows are never edited, and only a superuser reads all tenants'."""

    list_display = ("created_at", "source", "tenant_slug", "username", "api_key_name", "profile_name", "status",
                    "num_prompt_tokens", "num_output_tokens")
    list_filter = ("source", "status", "tenant_slug")
    search_fields = ("request_id", "username", "api_key_name")

    def has_module_permission(self, request):
        return request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
