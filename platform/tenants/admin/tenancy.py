from django.contrib import admin
from django.db.models import Count

from tenants import selectors, services
from tenants.admin.scoping import TenantScopedAdmin, adopt
from tenants.models import Membership, Tenant


@admin.register(Tenant)
class TenantAdmin(TenantScopedAdmin):
    tenant_field = ""
    tenant_admin_can_add = False
    tenant_admin_can_delete = False
    list_display = ["name", "slug", "is_active", "num_members", "created_at", "console_link"]
    list_filter = ["is_active"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_num_members=Count("memberships"))

    @admin.display(description="members", ordering="_num_members")
    def num_members(self, obj) -> int:
        return obj._num_members

    @admin.display(description="console")
    def console_link(self, obj):
        from django.urls import reverse
        from django.utils.html import format_html

        return format_html('<a href="{}">open</a>', reverse("console:tenant", args=[obj.slug]))

    def get_prepopulated_fields(self, request, obj=None):
        return {} if obj else self.prepopulated_fields

    def get_readonly_fields(self, request, obj=None):
        fields = ["created_at"]
        if obj is not None and not request.user.is_superuser:
            fields.append("slug")  # renaming moves URLs and engine keys for everyone: superusers only
        if not request.user.is_superuser:
            fields.append("is_active")
        return fields

    def save_model(self, request, obj, form, change):
        if change:
            if "slug" in form.changed_data:  # validated by the form (a slug, not taken)
                services.rename_tenant(obj, obj.slug, actor=request.user)
            services.update_tenant(obj, actor=request.user, name=obj.name, is_active=obj.is_active)
        else:
            adopt(obj, services.create_tenant(name=obj.name, slug=obj.slug, is_active=obj.is_active, actor=request.user))

    def get_deleted_objects(self, objs, request):
        deleted, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        if request.user.is_superuser:
            # The rows that refuse a deletion of their own (the default profile, API keys, the prompt
            # history, conversations) go with their tenant: the confirmation page lists them all.
            perms_needed = set()
        return deleted, model_count, perms_needed, protected

    def delete_model(self, request, obj):
        services.delete_tenant(obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        for tenant in queryset:
            services.delete_tenant(tenant, actor=request.user)


@admin.register(Membership)
class MembershipAdmin(TenantScopedAdmin):
    list_display = ["user", "tenant", "role", "created_at"]
    list_filter = ["role", "tenant"]
    search_fields = ["user__username", "user__email", "tenant__name"]
    list_select_related = ["user", "tenant"]

    def get_list_filter(self, request):
        return self.list_filter if request.user.is_superuser else ["role"]

    def get_readonly_fields(self, request, obj=None):
        return ["user", "tenant", "created_at"] if obj else ["created_at"]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "user" and not request.user.is_superuser:
            kwargs["queryset"] = selectors.users_a_tenant_admin_may_add(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request, obj, form, change):
        adopt(obj, services.add_member(obj.tenant, obj.user, role=obj.role, actor=request.user))

    def delete_model(self, request, obj):
        services.remove_member(obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        for membership in queryset:
            services.remove_member(membership, actor=request.user)
