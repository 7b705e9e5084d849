from django.contrib import admin
from django.db import models

from tenants import selectors


def adopt(target: models.Model, saved: models.Model) -> None:
    """Copy a service's saved row into the object the admin holds (the admin redirects and logs with it)."""
    for field in saved._meta.concrete_fields:
        setattr(target, field.attname, getattr(saved, field.attname))
    target._state.adding = False
    target._state.db = saved._state.db


class TenantScopedAdmin(admin.ModelAdmin):
    """Superusers: everything. Tenant admins: the objects of the tenants they administer, nothing else.

    Django model permissions are not consulted for these models: a tenant admin needs none, and a staff
    user without a tenant-admin role sees nothing here. `tenant_field` is the path from the model to
    its Tenant ("" for Tenant itself). `tenant_admin_can_*` say what tenant admins may do at all.
    """

    tenant_field = "tenant"
    tenant_admin_can_add = True
    tenant_admin_can_change = True
    tenant_admin_can_delete = True

    # --- scope ---
    def admin_tenants(self, request):
        if not hasattr(request, "_pagoda_admin_tenant_ids"):
            request._pagoda_admin_tenant_ids = set(
                selectors.admin_tenants_for_user(request.user).values_list("pk", flat=True)
            )
        return request._pagoda_admin_tenant_ids

    def tenant_id_of(self, obj) -> int | None:
        if not self.tenant_field:
            return obj.pk
        for part in self.tenant_field.split("__"):
            obj = getattr(obj, part)
        return obj.pk

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        lookup = f"{self.tenant_field}__in" if self.tenant_field else "pk__in"
        return queryset.filter(**{lookup: self.admin_tenants(request)})

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "tenant" and not request.user.is_superuser:
            kwargs["queryset"] = selectors.admin_tenants_for_user(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    # --- permissions ---
    def _allowed(self, request, obj, flag: bool) -> bool:
        if request.user.is_superuser:
            return True
        if not flag or not self.admin_tenants(request):
            return False
        return obj is None or self.tenant_id_of(obj) in self.admin_tenants(request)

    def has_module_permission(self, request) -> bool:
        return request.user.is_superuser or bool(self.admin_tenants(request))

    def has_view_permission(self, request, obj=None) -> bool:
        return self._allowed(request, obj, True)

    def has_add_permission(self, request) -> bool:
        return self._allowed(request, None, self.tenant_admin_can_add)

    def has_change_permission(self, request, obj=None) -> bool:
        return self._allowed(request, obj, self.tenant_admin_can_change)

    def has_delete_permission(self, request, obj=None) -> bool:
        return self._allowed(request, obj, self.tenant_admin_can_delete)


class ReadOnlyAdmin(TenantScopedAdmin):
    """Rows written by the system (audit log, chat history): viewable, never edited in the admin."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
