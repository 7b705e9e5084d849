"""A small OpenID provider for the single sign-on tests: django-oauth-toolkit's OpenID Connect support
(authorization code with PKCE required, RS256 ID tokens, JWKS and userinfo endpoints), its own SQLite
database and users, whose Django groups it sends in the `groups` claim. Started by tests/sso/conftest.py
on a loopback port; never part of Pagoda.

Environment: PROVIDER_DB (SQLite file), PROVIDER_ISSUER (http://127.0.0.1:<port>/o), PROVIDER_KEY_FILE
(the RSA private key, PEM).
"""
import os
from pathlib import Path

SECRET_KEY = "test-provider-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "provider_urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates",
              "DIRS": [Path(__file__).resolve().parent / "templates"],
              "OPTIONS": {"context_processors": ["django.template.context_processors.request"]}}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ.get("PROVIDER_DB", ":memory:")}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
# Two servers on 127.0.0.1 (this and Pagoda) would overwrite each other's session cookie.
SESSION_COOKIE_NAME = "provider_session"
CSRF_COOKIE_NAME = "provider_csrf"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # a test provider: fast

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": Path(os.environ["PROVIDER_KEY_FILE"]).read_text() if os.environ.get("PROVIDER_KEY_FILE") else "",
    "OIDC_ISS_ENDPOINT": os.environ.get("PROVIDER_ISSUER", ""),
    "PKCE_REQUIRED": True,
    "SCOPES": {"openid": "OpenID Connect", "profile": "Profile", "email": "E-mail"},
    "OAUTH2_VALIDATOR_CLASS": "provider_claims.GroupsClaimValidator",
}
