"""View decorators of tenant roles, for every app whose pages belong to one tenant (console, governance)."""
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.http import Http404

from tenants import selectors


def tenant_admin_required(view):
    """Login, then the tenant named by `slug` must be one the user administers; anything else is a 404.
    The view is called as view(request, tenant, ...)."""

    @login_required
    @wraps(view)
    def wrapper(request, slug: str, *args, **kwargs):
        tenant = selectors.admin_tenants_for_user(request.user).filter(slug=slug).first()
        if tenant is None:
            raise Http404("No such tenant")
        return view(request, tenant, *args, **kwargs)

    return wrapper
