"""Pagoda settings. The environment is read here, once; everything else reads django.conf.settings.

Environment:
  DATABASE_URL      postgres://user:pass@host:5432/name (psycopg 3) or sqlite:///path; default var/pagoda.sqlite3
  PAGODA_DB_POOL_SIZE  PostgreSQL only: keep up to this many connections per process in a pool (psycopg_pool)
                    instead of opening one per database call; default 0 (no pool). See env.database_pool
  PAGODA_DB_POOL_TIMEOUT_SECONDS  how long a call waits for a pooled connection before it fails (default 3)
  PAGODA_SQLITE_BUSY_TIMEOUT_SECONDS  SQLite only: how long a write waits for the write lock before it fails
                    (default 20); SQLite also runs in WAL mode with IMMEDIATE transactions (env.sqlite_options)
  PAGODA_DB_MAX_CONCURRENT_REQUESTS  page requests (all but /v1/, static files, probes) handled at once per
                    process; the rest queue (pagoda.db_queue). Default: the pool's size less 2 when pooled, else 16
  PAGODA_DB_QUEUE_TIMEOUT_SECONDS  how long a queued request waits for its turn before a 503 (default 300)
  REDIS_URL         redis://host:6379/0 -> channels-redis layer and the /v1 API's shared rate-limit counters;
                    default the in-memory layer and per-process counters (one process)
  PAGODA_MODEL      engine model name (default smollm2-135m-instruct)
  PAGODA_DEVICE     auto | cpu | cuda (default auto)
  PAGODA_ENGINE     on (start at ASGI start-up) | lazy (start on first use) | off (never; tests) — default on
  PAGODA_ENGINE_CONFIG  JSON object of extra EngineConfig fields, e.g. {"max_model_len": 4096}
  PAGODA_WEB_PROCESSES  web processes sharing one engine core (deploy/run.sh, `python -m pagoda.serve`;
                    default 1). The launcher sets, per process: PAGODA_ENGINE_LISTEN (the first process's
                    core also takes the others on this Unix socket) or PAGODA_ENGINE_CONNECT (use that core)
  PAGODA_TOOL_PARSER  the tool-call format of /v1 chat answers: hermes | llama3_json | mistral (default:
                    chosen from the model's chat template; see docs/API.md, tool calling)
  PAGODA_PIN_SYNC_SECONDS  how often the server picks up prompt changes made by other processes (default 5; 0 off)
  PAGODA_API_CACHE_SECONDS  how long a process serves API calls from what it read of a key, its tenant, profile,
                    system prompt and budgets (pagoda.ttl_cache; default 5, 0: read them on every call). A
                    key revoked or a tenant deactivated in another process stops working within this bound
  PAGODA_ENGINE_MAX_RESTARTS  restarts of a crashed engine loop per hour before it is left to the
                    process supervisor (/health stays 503); default 3, 0: never restart in-process
  SECRET_KEY        default: generated once into var/secret_key
  DEBUG             default false
  ALLOWED_HOSTS     comma-separated; default localhost,127.0.0.1,[::1]
  CSRF_TRUSTED_ORIGINS  comma-separated origins (for a reverse proxy on another host/port); the chat
                    socket's origin check (pagoda.ws_origin) accepts them too
  TIME_ZONE         default UTC
  PAGODA_SERVE_STATIC   serve /static/ from the ASGI app (no separate web server needed); default true
  PAGODA_ADMIN_USER / PAGODA_ADMIN_PASSWORD   first superuser made by `manage.py bootstrap` (default admin/admin)
  PAGODA_METRICS_ALLOWED_IPS  comma-separated addresses / CIDR networks that may read /metrics (default 127.0.0.1,::1)
  PAGODA_METRICS_TOKEN  bearer token that also opens /metrics, from anywhere (default: none)
  PAGODA_LOG_CONTENT    true: request log lines carry the prompt and completion text (default false)
  PAGODA_CHAT_MAX_MESSAGE_CHARS  longest chat message an employee may send, in characters (default 8000)
  PAGODA_CHAT_ENGINE_WAIT_SECONDS  how long a chat turn waits for an engine that is still loading (default 30)
  PAGODA_CHAT_STALE_REPLY_SECONDS  a chat reply still pending after this long was lost (its save failed, its
                    process died): shown failed, and stored so on its conversation's next turn or by
                    `manage.py fail_stale_replies` (default 3600)
  PAGODA_CHAT_REPLY_LOCK_SECONDS  a conversation whose replying process died is free for a new reply at
                    most this long after (the reply lease, renewed while a reply runs; default 30)
  PAGODA_CHAT_MAX_ATTACHMENT_BYTES  the largest file an employee may attach to a message (default 10 MB)
  PAGODA_REPLICA    this replica's name, sent as the X-Pagoda-Replica response header (default: none)
  PAGODA_BEHIND_HTTPS_PROXY  true: a TLS-terminating proxy in front sets X-Forwarded-Proto; trust it,
                    send session / CSRF cookies as Secure, redirect HTTP to HTTPS and send HSTS (default false)
  PAGODA_SSL_REDIRECT / PAGODA_HSTS_SECONDS / PAGODA_HSTS_INCLUDE_SUBDOMAINS / PAGODA_HSTS_PRELOAD
                    with the above: default true / one year / true / false
  PAGODA_VAR_DIR    where the generated secret key and the SQLite file live (default var/ in the repository)
  PAGODA_INVITATION_DAYS  how long a tenant admin's invitation link stays valid (default 7)
Single sign-on (platform/sso; docs/ADMIN.md, "Single sign-on"):
  PAGODA_PASSWORD_LOGIN  false: local passwords no longer log anyone in (the superuser's neither); needs
                    OpenID Connect or LDAP below (default true)
  PAGODA_OIDC_CLIENT_ID  turns OpenID Connect on (authorization code + PKCE); with it, all of:
  PAGODA_OIDC_ISSUER  the provider's issuer, exactly as in its discovery document and its ID tokens' iss
  PAGODA_OIDC_AUTHORIZATION_ENDPOINT / PAGODA_OIDC_TOKEN_ENDPOINT / PAGODA_OIDC_USERINFO_ENDPOINT /
  PAGODA_OIDC_JWKS_ENDPOINT  from <issuer>/.well-known/openid-configuration
  PAGODA_OIDC_CLIENT_SECRET  of a confidential client (sent as HTTP Basic); empty for a public client
  PAGODA_OIDC_SCOPES  default "openid email profile" (add what makes your provider send groups)
  PAGODA_OIDC_SIGN_ALGO  the ID tokens' algorithm (default RS256)
  PAGODA_OIDC_GROUPS_CLAIM  the claim listing the user's groups (default groups)
  PAGODA_OIDC_USERNAME_CLAIM  names a new user (default preferred_username; else email, else sub)
  PAGODA_OIDC_BUTTON_LABEL  "Sign in with <label>" on the login page (default single sign-on)
  PAGODA_OIDC_LEEWAY_SECONDS  clock skew allowed on exp / iat (default 60)
  PAGODA_OIDC_VERIFY_TLS / PAGODA_OIDC_CA_BUNDLE  check the provider's certificate (default true) / with
                    this CA file; PAGODA_OIDC_TIMEOUT_SECONDS per call to the provider (default 10)
  PAGODA_LDAP_URI   turns LDAP / Active Directory on: ldap://dc1.example.com or ldaps://...; with it:
  PAGODA_LDAP_USER_SEARCH_BASE / PAGODA_LDAP_GROUP_SEARCH_BASE  where users and groups are found
  PAGODA_LDAP_BIND_DN / PAGODA_LDAP_BIND_PASSWORD  the service account that searches (empty: anonymous)
  PAGODA_LDAP_GROUP_TYPE  groupOfNames (default) | groupOfUniqueNames | posixGroup | activeDirectory |
                    nestedActiveDirectory
  PAGODA_LDAP_USER_FILTER  default (uid=%(user)s), or (sAMAccountName=%(user)s) for Active Directory
  PAGODA_LDAP_START_TLS / PAGODA_LDAP_CA_FILE / PAGODA_LDAP_TIMEOUT_SECONDS  default false / none / 10
  PAGODA_LDAP_ATTR_FIRST_NAME / _LAST_NAME / _EMAIL  default givenName / sn / mail
Several replicas (deploy/, docs/DEPLOY.md) need one DATABASE_URL, one REDIS_URL and one SECRET_KEY.
"""
import json
import os
import secrets
from pathlib import Path

from pagoda import env
from sso import environment as sso_env

BASE_DIR = Path(__file__).resolve().parents[2]  # the repository root
PLATFORM_DIR = BASE_DIR / "platform"
VAR_DIR = Path(os.environ.get("PAGODA_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    if os.environ.get("SECRET_KEY"):
        return os.environ["SECRET_KEY"]
    # A fresh machine gets its own key, kept across restarts, instead of a well-known default.
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env.parse_bool(os.environ.get("DEBUG"), default=False)
ALLOWED_HOSTS = env.parse_list(os.environ.get("ALLOWED_HOSTS"), ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.parse_list(os.environ.get("CSRF_TRUSTED_ORIGINS"), [])
if env.parse_bool(os.environ.get("PAGODA_BEHIND_HTTPS_PROXY"), default=False):
    # Only behind a proxy that overwrites X-Forwarded-Proto (deploy/nginx/pagoda.conf does).
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    # Production over HTTPS (`manage.py check --deploy` is clean): plain HTTP is redirected, except the
    # probes a load balancer sends straight to a replica, and browsers keep to HTTPS (HSTS).
    SECURE_SSL_REDIRECT = env.parse_bool(os.environ.get("PAGODA_SSL_REDIRECT"), default=True)
    SECURE_REDIRECT_EXEMPT = [r"^health$", r"^metrics$"]
    SECURE_HSTS_SECONDS = int(os.environ.get("PAGODA_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.parse_bool(os.environ.get("PAGODA_HSTS_INCLUDE_SUBDOMAINS"), default=True)
    SECURE_HSTS_PRELOAD = env.parse_bool(os.environ.get("PAGODA_HSTS_PRELOAD"), default=False)
    if not SECURE_HSTS_PRELOAD:  # an intranet host is not on the browsers' preload list: nothing to warn about
        SILENCED_SYSTEM_CHECKS = ["security.W021"]

INSTALLED_APPS = [
    "daphne",  # first: its runserver serves ASGI (websockets included)
    "pagoda.apps.PagodaAdminConfig",  # django.contrib.admin with the tenant-aware site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "channels",
    "tenants",
    "console",
    "ninja",  # django-ninja: its bundled Swagger UI for /v1/docs (no CDN on-prem)
    "api",  # the OpenAI-compatible REST API under /v1/
    "observability",
    "chat",  # the employees' browser chat: page, history and the /ws/chat/ WebSocket
    "mozilla_django_oidc",
    "sso",  # single sign-on: OpenID Connect, LDAP / Active Directory, group -> tenant mappings
    "governance",  # budgets, the usage ledger, retention, employees' export and erasure
    "people",  # tenant admins' people page: invitations, SSO pre-provisioning, roles, offboarding
]

MIDDLEWARE = [
    "pagoda.db_queue.DatabaseQueueMiddleware",  # first: a burst of page requests queues before it opens connections
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "pagoda.middleware.ReplicaRoutingMiddleware",  # X-Pagoda-Replica, and the tenant cookie nginx hashes
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "pagoda.urls"
ASGI_APPLICATION = "pagoda.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "sso.context.login_options",
            ],
        },
    },
]

DATABASES = {"default": env.parse_database_url(os.environ.get("DATABASE_URL"), VAR_DIR / "pagoda.sqlite3")}
# Under ASGI every request may run in a different thread: persistent connections are not reused safely.
DATABASES["default"]["CONN_MAX_AGE"] = 0
_DB_POOL = env.database_pool(os.environ.get("PAGODA_DB_POOL_SIZE"), os.environ.get("PAGODA_DB_POOL_TIMEOUT_SECONDS"))
if _DB_POOL and DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["OPTIONS"]["pool"] = _DB_POOL
    # Checked when taken from the pool: a connection that died while it sat there (a restarted server,
    # a terminated session) is replaced instead of failing the call that got it.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = env.sqlite_options(os.environ.get("PAGODA_SQLITE_BUSY_TIMEOUT_SECONDS"))
    # Django's backend, keeping closed connections for the next call (opening one costs more than most calls).
    DATABASES["default"]["ENGINE"] = "pagoda.sqlite_pool"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Page requests handled at once. With a pool, two fewer than it holds: the chat sockets' calls (one
# thread) and /v1's do not queue here, and must find a connection free within the pool's timeout.
_POOL_SIZE = DATABASES["default"]["OPTIONS"].get("pool", {}).get("max_size")
PAGODA_DB_MAX_CONCURRENT_REQUESTS = env.positive_int(
    os.environ.get("PAGODA_DB_MAX_CONCURRENT_REQUESTS"), max(1, _POOL_SIZE - 2) if _POOL_SIZE else 16,
    "PAGODA_DB_MAX_CONCURRENT_REQUESTS")
# Longer than a burst of logins takes to drain: each hashes its password (0.3 s of CPU), so 256 take
# about 40 s on 2 idle cores and minutes on busy ones. nginx waits a little longer for a page
# (deploy/nginx/pagoda.conf), so the browser gets this 503, not nginx's 504.
PAGODA_DB_QUEUE_TIMEOUT_SECONDS = float(os.environ.get("PAGODA_DB_QUEUE_TIMEOUT_SECONDS", "300"))

CHANNEL_LAYERS = env.channel_layers(os.environ.get("REDIS_URL"))
# Shared counters for the /v1 API rate limits (api.ratelimit); None: counted in this process only.
PAGODA_REDIS_URL = os.environ.get("REDIS_URL") or None

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# --- single sign-on (see platform/sso) ---
PAGODA_PASSWORD_LOGIN = env.parse_bool(os.environ.get("PAGODA_PASSWORD_LOGIN"), default=True)
globals().update(sso_env.oidc_settings(os.environ))
globals().update(sso_env.ldap_settings(os.environ))
AUTHENTICATION_BACKENDS = sso_env.authentication_backends(
    oidc=PAGODA_OIDC_ENABLED, ldap=PAGODA_LDAP_ENABLED, password_login=PAGODA_PASSWORD_LOGIN)  # noqa: F821
PAGODA_OIDC_BUTTON_LABEL = globals().get("PAGODA_OIDC_BUTTON_LABEL", "single sign-on")
# An invitation link (people app) is valid this many days.
PAGODA_INVITATION_DAYS = env.positive_int(os.environ.get("PAGODA_INVITATION_DAYS"), 7, "PAGODA_INVITATION_DAYS")
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("ko", "한국어")]
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
PAGODA_SERVE_STATIC = env.parse_bool(os.environ.get("PAGODA_SERVE_STATIC"), default=True)

# --- the in-process engine (see platform/engine_runtime) ---
PAGODA_MODEL = os.environ.get("PAGODA_MODEL", "smollm2-135m-instruct")
PAGODA_DEVICE = os.environ.get("PAGODA_DEVICE", "auto")
PAGODA_ENGINE = os.environ.get("PAGODA_ENGINE", "on").strip().lower()
if PAGODA_ENGINE not in {"on", "lazy", "off"}:
    raise ValueError(f"PAGODA_ENGINE must be on, lazy or off, not {PAGODA_ENGINE!r}")
PAGODA_ENGINE_CONFIG = json.loads(os.environ.get("PAGODA_ENGINE_CONFIG") or "{}")
PAGODA_ENGINE_LISTEN = os.environ.get("PAGODA_ENGINE_LISTEN") or None
PAGODA_ENGINE_CONNECT = os.environ.get("PAGODA_ENGINE_CONNECT") or None
# The tool-call parser of /v1 (inference.tool_parsers); empty: chosen from the model's chat template.
# Checked against the parsers when the api app loads.
PAGODA_TOOL_PARSER = os.environ.get("PAGODA_TOOL_PARSER", "").strip() or None
# How often the server re-reads the active system prompts to pin changes made by other processes
# (management commands, other workers); 0 turns the watcher off.
PAGODA_PIN_SYNC_SECONDS = float(os.environ.get("PAGODA_PIN_SYNC_SECONDS", "5"))
PAGODA_API_CACHE_SECONDS = float(os.environ.get("PAGODA_API_CACHE_SECONDS", "5"))
# A crashed engine loop is restarted in-process this many times an hour (engine_runtime's watchdog).
PAGODA_ENGINE_MAX_RESTARTS = int(os.environ.get("PAGODA_ENGINE_MAX_RESTARTS", "3"))

# --- running as one of several replicas (see pagoda.middleware, tenants.pin_events, deploy/) ---
PAGODA_REPLICA = os.environ.get("PAGODA_REPLICA", "").strip()

PAGODA_ADMIN_USER = os.environ.get("PAGODA_ADMIN_USER", "admin")
PAGODA_ADMIN_PASSWORD = os.environ.get("PAGODA_ADMIN_PASSWORD", "admin")

# --- observability (see platform/observability) ---
PAGODA_METRICS_ALLOWED_IPS = env.parse_list(os.environ.get("PAGODA_METRICS_ALLOWED_IPS"), ["127.0.0.1", "::1"])
PAGODA_METRICS_TOKEN = os.environ.get("PAGODA_METRICS_TOKEN", "")
PAGODA_LOG_CONTENT = env.parse_bool(os.environ.get("PAGODA_LOG_CONTENT"), default=False)

# --- browser chat (see platform/chat) ---
PAGODA_CHAT_MAX_MESSAGE_CHARS = int(os.environ.get("PAGODA_CHAT_MAX_MESSAGE_CHARS", "8000"))
PAGODA_CHAT_ENGINE_WAIT_SECONDS = float(os.environ.get("PAGODA_CHAT_ENGINE_WAIT_SECONDS", "30"))
# Longer than any reply streams: a reply pending past it has nobody left to save it (chat.services).
PAGODA_CHAT_STALE_REPLY_SECONDS = float(os.environ.get("PAGODA_CHAT_STALE_REPLY_SECONDS", "3600"))
# A conversation's reply lease (chat.turn_lock): renewed every third of this while a reply runs, so a
# conversation whose replying process died is free again at most this long after.
PAGODA_CHAT_REPLY_LOCK_SECONDS = float(os.environ.get("PAGODA_CHAT_REPLY_LOCK_SECONDS", "30"))
PAGODA_CHAT_MAX_ATTACHMENT_BYTES = int(os.environ.get("PAGODA_CHAT_MAX_ATTACHMENT_BYTES", "10000000"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "observability.request_log.JsonFormatter"},
    },
    "filters": {"health_unavailable_at_info": {"()": "pagoda.log_filters.HealthUnavailableAtInfo"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
        "requests": {"class": "logging.StreamHandler", "formatter": "json"},
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "django.request": {"filters": ["health_unavailable_at_info"]},  # a loading model's /health 503s: INFO
        # one JSON line per finished request (observability.request_log), not repeated as plain text
        "pagoda.requests": {"handlers": ["requests"], "level": "INFO", "propagate": False},
    },
}
