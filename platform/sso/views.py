"""The OpenID Connect endpoints, and the page that says why a sign-in was refused.

A refused sign-in (a token with a wrong signature, audience, issuer or nonce, an expired token, a
replayed or foreign state, a code the provider refuses, a deactivated account) renders sso/failed.html
with the reason in words and a 4xx status, and is audited as sso.login_failed; never a 500.
"""
from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.shortcuts import render
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from sso.errors import REASONS, LoginRefused
from tenants import audit
from tenants.authentication import client_address

logger = logging.getLogger(__name__)


def failed(request, reason: str, detail: str = ""):
    """The failure page for `reason` (a key of sso.errors.REASONS), audited."""
    status, message = REASONS[reason]
    logger.info("single sign-on refused (%s): %s", reason, detail)
    audit.record("sso.login_failed", after={"source": "oidc", "reason": reason, "detail": detail[:500],
                                            "address": client_address(request)})
    return render(request, "sso/failed.html", {"reason": reason, "message": message}, status=status)



class OidcLoginView(OIDCAuthenticationRequestView):
    """Redirects to the provider with state, nonce and a PKCE code challenge."""

    def dispatch(self, request, *args, **kwargs):
        if not getattr(settings, "PAGODA_OIDC_ENABLED", False):
            return failed(request, "disabled")
        return super().dispatch(request, *args, **kwargs)

    def __init__(self, *args, **kwargs):
        # mozilla-django-oidc reads its settings here: only when single sign-on is set up
        if getattr(settings, "PAGODA_OIDC_ENABLED", False):
            super().__init__(*args, **kwargs)
        else:
            super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)


class OidcCallbackView(OIDCAuthenticationCallbackView):
    """The provider sends the browser back here with ?code&state (or ?error)."""

    def get(self, request):
        if not getattr(settings, "PAGODA_OIDC_ENABLED", False):
            return failed(request, "disabled")
        try:
            return super().get(request)
        except LoginRefused as exc:
            return failed(request, exc.reason, exc.detail)
        except SuspiciousOperation as exc:  # a state this session never issued, or issued and used
            return failed(request, "state", str(exc))

    def login_failure(self):
        error = self.request.GET.get("error")
        if error:
            return failed(self.request, "provider", f"{error}: {self.request.GET.get('error_description', '')}")
        return failed(self.request, "state", "no sign-in in progress in this session")
