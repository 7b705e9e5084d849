"""Why a single sign-on login was refused: one code per kind, each with the sentence the failure page
shows (sso.views.failed) and the HTTP status it answers with."""
from __future__ import annotations

from django.utils.translation import gettext_lazy as _

REASONS = {
    # code: (status, what the page says)
    "signature": (403, _("The sign-in token was not signed by your organisation's identity provider.")),
    "audience": (403, _("The sign-in token was issued for another application, not for Pagoda.")),
    "issuer": (403, _("The sign-in token comes from an identity provider Pagoda is not set up to trust.")),
    "expired": (403, _("The sign-in token has expired. Please sign in again.")),
    "nonce": (403, _("The sign-in token does not belong to this sign-in attempt.")),
    "token": (403, _("The sign-in token is malformed or incomplete.")),
    "claims": (403, _("The identity provider did not say who you are (no subject, or a different one).")),
    "code": (403, _("The identity provider refused this sign-in code (already used, expired, or not ours).")),
    "state": (400, _("This sign-in link was already used or does not belong to this browser. "
                     "Please start again from the login page.")),
    "provider": (403, _("The identity provider refused the sign-in.")),
    "unreachable": (503, _("The identity provider could not be reached. Please try again in a moment.")),
    "deactivated": (403, _("Your Pagoda account is deactivated. Ask your administrator.")),
    "disabled": (404, _("Single sign-on is not set up on this server.")),
}


class LoginRefused(Exception):
    """A single sign-on login refused for `reason` (a key of REASONS); `detail` goes to the log and
    the audit, never to the page."""

    def __init__(self, reason: str, detail: str = ""):
        if reason not in REASONS:
            raise ValueError(f"unknown reason {reason!r}")
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
