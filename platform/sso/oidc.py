"""OpenID Connect logins: the authorization code flow with PKCE (S256) and a nonce, through
mozilla-django-oidc, with the ID token checked in full before anyone is logged in.

    /sso/oidc/login/ -> the provider's authorization endpoint (state, nonce, code_challenge in the
    session) -> the provider's login page -> /sso/oidc/callback/?code&state (sso.views.OidcCallbackView)
    -> this backend: code + code_verifier to the token endpoint, ID token verified (signature against
    the provider's JWKS, issuer, audience = our client id, expiry, nonce), claims from the userinfo
    endpoint (same subject), the local user found by (issuer, subject) or created, the group
    mappings re-applied from the groups claim.

mozilla-django-oidc itself skips the audience check and lets an expired token through as a 500;
verify_token below replaces its check. Every refusal is a LoginRefused with its reason.
"""
from __future__ import annotations

import logging

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.utils import timezone
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from sso.errors import LoginRefused
from sso.mapping import apply_group_mappings
from sso.models import ExternalIdentity, Source

logger = logging.getLogger(__name__)


def token_claims(token: str, key, *, algorithm: str, audience: str, issuer: str, leeway: float) -> dict:
    """The verified claims of ID token `token`; LoginRefused with the reason otherwise."""
    try:
        claims = jwt.decode(token, key, algorithms=[algorithm], audience=audience, issuer=issuer, leeway=leeway,
                            options={"require": ["exp", "iat", "iss", "aud", "sub"]})
    except jwt.ExpiredSignatureError as exc:
        raise LoginRefused("expired", str(exc)) from exc
    except jwt.InvalidAudienceError as exc:
        raise LoginRefused("audience", str(exc)) from exc
    except jwt.InvalidIssuerError as exc:
        raise LoginRefused("issuer", str(exc)) from exc
    except (jwt.InvalidSignatureError, jwt.InvalidAlgorithmError) as exc:
        raise LoginRefused("signature", str(exc)) from exc
    except jwt.InvalidTokenError as exc:
        raise LoginRefused("token", str(exc)) from exc
    # Several audiences: the token must say it was issued to us (OpenID Connect Core 3.1.3.7).
    if isinstance(claims["aud"], list) and len(claims["aud"]) > 1 and claims.get("azp") != audience:
        raise LoginRefused("audience", f"azp {claims.get('azp')!r}")
    return claims


def group_names(claims: dict, claim: str) -> list[str]:
    """The groups claim as a list of strings (a provider may send one group as a bare string)."""
    value = claims.get(claim) or []
    if isinstance(value, str):
        value = [value]
    return [str(v) for v in value]


def email_verified(claims: dict) -> bool:
    """False only when the provider says the e-mail is unverified (`email_verified` false, or "false"
    as some send it); providers that never send the claim (Entra ID) vouch for their addresses."""
    return str(claims.get("email_verified", True)).strip().lower() != "false"


class OidcBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend, with the checks above and users keyed by (issuer, subject)."""

    def verify_token(self, token, **kwargs):
        if not token:
            raise LoginRefused("token", "no id_token in the token response")
        try:
            key = self.OIDC_RP_IDP_SIGN_KEY or self.retrieve_matching_jwk(token)
        except SuspiciousOperation as exc:  # no key of the token's kid and algorithm in the JWKS
            raise LoginRefused("signature", str(exc)) from exc
        except jwt.InvalidTokenError as exc:
            raise LoginRefused("token", str(exc)) from exc
        claims = token_claims(token, key, algorithm=self.OIDC_RP_SIGN_ALGO, audience=self.OIDC_RP_CLIENT_ID,
                              issuer=settings.PAGODA_OIDC_ISSUER, leeway=settings.PAGODA_OIDC_LEEWAY_SECONDS)
        if "nonce" in kwargs and self.get_settings("OIDC_USE_NONCE", True) and claims.get("nonce") != kwargs["nonce"]:
            raise LoginRefused("nonce")
        return claims

    def get_token(self, payload):
        try:
            return super().get_token(payload)
        except requests.HTTPError as exc:  # invalid_grant: a used or expired code, a wrong code_verifier
            raise LoginRefused("code", str(exc)[:500]) from exc
        except requests.RequestException as exc:
            raise LoginRefused("unreachable", str(exc)) from exc

    def get_userinfo(self, access_token, id_token, payload):
        try:
            claims = super().get_userinfo(access_token, id_token, payload)
        except requests.RequestException as exc:
            raise LoginRefused("unreachable", f"userinfo: {exc}") from exc
        # The userinfo answer speaks for the ID token's subject, or for nobody (Core 5.3.2).
        if claims.get("sub") != payload.get("sub"):
            raise LoginRefused("claims", "userinfo sub differs from the ID token's")
        return claims

    def get_or_create_user(self, access_token, id_token, payload):
        claims = self.get_userinfo(access_token, id_token, payload)
        with transaction.atomic():
            identity = (ExternalIdentity.objects.select_related("user")
                        .filter(issuer=settings.PAGODA_OIDC_ISSUER, subject=claims["sub"]).first())
            if identity is None:
                user = self._create_user(claims)
                identity = ExternalIdentity.objects.create(user=user, issuer=settings.PAGODA_OIDC_ISSUER,
                                                           subject=claims["sub"])
            user = identity.user
            if not user.is_active:
                raise LoginRefused("deactivated", user.get_username())
            self.update_user(user, claims)
            identity.last_login_at = timezone.now()
            identity.save(update_fields=["last_login_at"])
            apply_group_mappings(user, Source.OIDC, group_names(claims, settings.PAGODA_OIDC_GROUPS_CLAIM),
                                 email_verified=email_verified(claims))
        return user

    def authenticate(self, request, **kwargs):
        try:
            return super().authenticate(request, **kwargs)
        except (jwt.InvalidTokenError, ValueError, KeyError) as exc:  # a malformed token response
            raise LoginRefused("token", repr(exc)) from exc

    def update_user(self, user, claims):
        fields = {"email": claims.get("email") or user.email,
                  "first_name": (claims.get("given_name") or user.first_name)[:150],
                  "last_name": (claims.get("family_name") or user.last_name)[:150]}
        changed = [name for name, value in fields.items() if getattr(user, name) != value]
        for name in changed:
            setattr(user, name, fields[name])
        if changed:
            user.save(update_fields=changed)
        return user

    def _create_user(self, claims):
        """A new local user named after the username claim (made unique), with no usable password."""
        model = get_user_model()
        base = str(claims.get(settings.PAGODA_OIDC_USERNAME_CLAIM) or claims.get("email") or claims["sub"])[:140]
        username, n = base, 1
        while model.objects.filter(username__iexact=username).exists():
            # never take over a local account of the same name: that person may be someone else
            n += 1
            username = f"{base}-{n}"
        return model.objects.create_user(username, email=claims.get("email") or "")  # no password: unusable
