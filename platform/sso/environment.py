"""Single sign-on settings from the environment (read once by pagoda.settings; documented there and
in deploy/env.example). Each function returns the settings it makes, for `globals().update(...)`:
mozilla-django-oidc reads OIDC_*, django-auth-ldap reads AUTH_LDAP_*.

OpenID Connect is on when PAGODA_OIDC_CLIENT_ID is set, LDAP when PAGODA_LDAP_URI is; a half-done
configuration fails at start with the variable it lacks, not at someone's first login.
"""
from __future__ import annotations

from collections.abc import Mapping

from pagoda.env import parse_bool

OIDC_BACKEND = "sso.oidc.OidcBackend"
LDAP_BACKEND = "sso.ldap_backend.DirectoryBackend"
PASSWORD_BACKEND = "django.contrib.auth.backends.ModelBackend"
_OIDC_REQUIRED = ("PAGODA_OIDC_ISSUER", "PAGODA_OIDC_AUTHORIZATION_ENDPOINT", "PAGODA_OIDC_TOKEN_ENDPOINT",
                  "PAGODA_OIDC_USERINFO_ENDPOINT", "PAGODA_OIDC_JWKS_ENDPOINT")
_LDAP_GROUP_TYPES = {  # PAGODA_LDAP_GROUP_TYPE -> django_auth_ldap.config class
    "groupOfNames": "GroupOfNamesType",
    "groupOfUniqueNames": "GroupOfUniqueNamesType",
    "posixGroup": "PosixGroupType",
    "activeDirectory": "ActiveDirectoryGroupType",
    "nestedActiveDirectory": "NestedActiveDirectoryGroupType",
}


class SsoConfigError(ValueError):
    """A single sign-on variable is missing or malformed."""


def oidc_settings(environ: Mapping[str, str]) -> dict:
    """{} when OpenID Connect is off; else the OIDC_* settings (authorization code with PKCE, S256)."""
    client_id = environ.get("PAGODA_OIDC_CLIENT_ID", "").strip()
    if not client_id:
        return {"PAGODA_OIDC_ENABLED": False}
    missing = [name for name in _OIDC_REQUIRED if not environ.get(name, "").strip()]
    if missing:
        raise SsoConfigError(f"PAGODA_OIDC_CLIENT_ID is set, so these must be too: {', '.join(missing)}")
    return {
        "PAGODA_OIDC_ENABLED": True,
        "PAGODA_OIDC_ISSUER": environ["PAGODA_OIDC_ISSUER"].strip(),
        "PAGODA_OIDC_GROUPS_CLAIM": environ.get("PAGODA_OIDC_GROUPS_CLAIM", "groups").strip(),
        "PAGODA_OIDC_USERNAME_CLAIM": environ.get("PAGODA_OIDC_USERNAME_CLAIM", "preferred_username").strip(),
        "PAGODA_OIDC_LEEWAY_SECONDS": int(environ.get("PAGODA_OIDC_LEEWAY_SECONDS", "60")),
        "PAGODA_OIDC_BUTTON_LABEL": environ.get("PAGODA_OIDC_BUTTON_LABEL", "").strip() or "single sign-on",
        "OIDC_RP_CLIENT_ID": client_id,
        "OIDC_RP_CLIENT_SECRET": environ.get("PAGODA_OIDC_CLIENT_SECRET", ""),
        "OIDC_OP_AUTHORIZATION_ENDPOINT": environ["PAGODA_OIDC_AUTHORIZATION_ENDPOINT"].strip(),
        "OIDC_OP_TOKEN_ENDPOINT": environ["PAGODA_OIDC_TOKEN_ENDPOINT"].strip(),
        "OIDC_OP_USER_ENDPOINT": environ["PAGODA_OIDC_USERINFO_ENDPOINT"].strip(),
        "OIDC_OP_JWKS_ENDPOINT": environ["PAGODA_OIDC_JWKS_ENDPOINT"].strip(),
        "OIDC_RP_SIGN_ALGO": environ.get("PAGODA_OIDC_SIGN_ALGO", "RS256").strip(),
        "OIDC_RP_SCOPES": environ.get("PAGODA_OIDC_SCOPES", "openid email profile").strip(),
        "OIDC_USE_PKCE": True,
        "OIDC_PKCE_CODE_CHALLENGE_METHOD": "S256",
        "OIDC_USE_NONCE": True,
        "OIDC_VERIFY_SSL": environ.get("PAGODA_OIDC_CA_BUNDLE", "").strip()
        or parse_bool(environ.get("PAGODA_OIDC_VERIFY_TLS"), default=True),
        "OIDC_TIMEOUT": float(environ.get("PAGODA_OIDC_TIMEOUT_SECONDS", "10")),
        "OIDC_AUTHENTICATION_CALLBACK_URL": "sso:oidc_callback",
        # The client secret is sent as HTTP Basic (client_secret_basic), which every provider accepts.
        "OIDC_TOKEN_USE_BASIC_AUTH": bool(environ.get("PAGODA_OIDC_CLIENT_SECRET")),
        "LOGIN_REDIRECT_URL_FAILURE": "/sso/failed/",
    }


def ldap_settings(environ: Mapping[str, str]) -> dict:
    """{} when LDAP is off; else the AUTH_LDAP_* settings: bind, search the user, read their groups."""
    uri = environ.get("PAGODA_LDAP_URI", "").strip()
    if not uri:
        return {"PAGODA_LDAP_ENABLED": False}
    import ldap
    from django_auth_ldap import config

    missing = [n for n in ("PAGODA_LDAP_USER_SEARCH_BASE", "PAGODA_LDAP_GROUP_SEARCH_BASE")
               if not environ.get(n, "").strip()]
    if missing:
        raise SsoConfigError(f"PAGODA_LDAP_URI is set, so these must be too: {', '.join(missing)}")
    type_name = environ.get("PAGODA_LDAP_GROUP_TYPE", "groupOfNames").strip()
    if type_name not in _LDAP_GROUP_TYPES:
        raise SsoConfigError(f"PAGODA_LDAP_GROUP_TYPE must be one of {', '.join(_LDAP_GROUP_TYPES)}, not {type_name!r}")
    active_directory = "ActiveDirectory" in type_name
    user_filter = environ.get("PAGODA_LDAP_USER_FILTER", "").strip() or (
        "(sAMAccountName=%(user)s)" if active_directory else "(uid=%(user)s)")
    group_filter = "(objectClass=group)" if active_directory else {
        "groupOfNames": "(objectClass=groupOfNames)", "groupOfUniqueNames": "(objectClass=groupOfUniqueNames)",
        "posixGroup": "(objectClass=posixGroup)"}[type_name]
    ca_file = environ.get("PAGODA_LDAP_CA_FILE", "").strip()
    options = {ldap.OPT_REFERRALS: 0, ldap.OPT_NETWORK_TIMEOUT: float(environ.get("PAGODA_LDAP_TIMEOUT_SECONDS", "10"))}
    if ca_file:
        options[ldap.OPT_X_TLS_CACERTFILE] = ca_file
        options[ldap.OPT_X_TLS_NEWCTX] = 0
    return {
        "PAGODA_LDAP_ENABLED": True,
        "AUTH_LDAP_SERVER_URI": uri,
        "AUTH_LDAP_START_TLS": parse_bool(environ.get("PAGODA_LDAP_START_TLS"), default=False),
        "AUTH_LDAP_BIND_DN": environ.get("PAGODA_LDAP_BIND_DN", ""),
        "AUTH_LDAP_BIND_PASSWORD": environ.get("PAGODA_LDAP_BIND_PASSWORD", ""),
        "AUTH_LDAP_CONNECTION_OPTIONS": options,
        "AUTH_LDAP_USER_SEARCH": config.LDAPSearch(
            environ["PAGODA_LDAP_USER_SEARCH_BASE"].strip(), ldap.SCOPE_SUBTREE, user_filter),
        "AUTH_LDAP_GROUP_SEARCH": config.LDAPSearch(
            environ["PAGODA_LDAP_GROUP_SEARCH_BASE"].strip(), ldap.SCOPE_SUBTREE, group_filter),
        "AUTH_LDAP_GROUP_TYPE": getattr(config, _LDAP_GROUP_TYPES[type_name])(),
        "AUTH_LDAP_USER_ATTR_MAP": {"first_name": environ.get("PAGODA_LDAP_ATTR_FIRST_NAME", "givenName"),
                                    "last_name": environ.get("PAGODA_LDAP_ATTR_LAST_NAME", "sn"),
                                    "email": environ.get("PAGODA_LDAP_ATTR_EMAIL", "mail")},
        "AUTH_LDAP_ALWAYS_UPDATE_USER": True,
        "AUTH_LDAP_FIND_GROUP_PERMS": False,
        "AUTH_LDAP_CACHE_TIMEOUT": 0,  # groups are read afresh at each login: the mapping follows them
    }


def authentication_backends(*, oidc: bool, ldap: bool, password_login: bool) -> list[str]:
    """The backends in the order they are tried; password_login False drops local passwords."""
    backends = [LDAP_BACKEND] if ldap else []
    if password_login:
        backends.append(PASSWORD_BACKEND)
    if oidc:
        backends.append(OIDC_BACKEND)
    if not backends:
        raise SsoConfigError("PAGODA_PASSWORD_LOGIN=false needs PAGODA_OIDC_CLIENT_ID or PAGODA_LDAP_URI: "
                             "nobody could log in")
    return backends
