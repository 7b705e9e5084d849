"""The admin site: superusers and staff as usual, plus tenant admins, who see only their tenants' objects."""
from django.contrib import admin

from tenants.authentication import ThrottledAuthenticationForm


class PagodaAdminSite(admin.AdminSite):
    site_header = "Pagoda administration"
    # Django's admin login form accepts staff only; tenant admins are not staff. Any active user may
    # log in here, and has_permission below decides who gets past the index. Failed logins are slowed
    # down as on the login page (tenants.authentication).
    login_form = ThrottledAuthenticationForm
    site_title = "Pagoda admin"
    index_title = "Tenants, prompts and profiles"

    def has_permission(self, request) -> bool:
        user = request.user
        if not (user.is_active and user.is_authenticated):
            return False
        if user.is_staff:
            return True
        from tenants.selectors import is_any_tenant_admin  # lazy: the site is built before apps are ready

        return is_any_tenant_admin(user)
