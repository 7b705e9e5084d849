from django.contrib.admin.apps import AdminConfig


class PagodaAdminConfig(AdminConfig):
    """django.contrib.admin, with the site that also lets tenant admins in (see pagoda.admin_site)."""

    default_site = "pagoda.admin_site.PagodaAdminSite"
