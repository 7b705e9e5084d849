"""The WebSocket origin check: a socket opens only from the page's own origin or a trusted one.

A browser sends any site's cookies with a WebSocket handshake (CSRF rules do not apply to it), so the
Origin header is what stops another page from opening a chat as the logged-in user. channels'
AllowedHostsOriginValidator compares only the Origin's host name with ALLOWED_HOSTS: a page on
another port of the chat's host (another web app on the same machine) passed. This applies Django's
CSRF origin rule (django.middleware.csrf) to the handshake instead:

- the Origin's host:port equals the Host the socket was opened on, and ALLOWED_HOSTS accepts that
  host (scheme-less: TLS may end at a proxy that speaks plain ws:// to daphne), or
- the Origin matches an entry of CSRF_TRUSTED_ORIGINS: the same scheme and host:port, or a subdomain
  of a `https://*.example.com` entry.

Port 80 or 443 counts as no port (browsers leave the default port out of both headers). A missing or
`null` Origin is refused.
"""
from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import is_same_domain, split_domain_port, validate_host

_DEFAULT_PORTS = ("", "80", "443")


def _host_port(netloc: str) -> tuple[str, str] | None:
    """(domain, host[:port]) of a Host header or an origin's netloc, lowercased, 80/443 dropped; None if malformed."""
    domain, port = split_domain_port(netloc)
    if not domain:
        return None
    return domain, domain if port in _DEFAULT_PORTS else f"{domain}:{port}"


def _allowed_hosts() -> list[str]:
    # As HttpRequest.get_host(): with DEBUG on and ALLOWED_HOSTS empty, Django allows the local names.
    if settings.DEBUG and not settings.ALLOWED_HOSTS:
        return [".localhost", "127.0.0.1", "[::1]"]
    return settings.ALLOWED_HOSTS


def _trusted(scheme: str, host_port: str) -> bool:
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        parts = urlsplit(entry.lower())
        wildcard = parts.netloc.startswith("*")
        trusted = _host_port(parts.netloc.lstrip("*"))
        if parts.scheme != scheme or trusted is None:
            continue
        if trusted[1] == host_port or (wildcard and is_same_domain(host_port, trusted[1])):
            return True
    return False


def origin_allowed(origin: str | None, host: str | None) -> bool:
    """Whether a handshake with these Origin and Host headers may go on (the rule in the module docstring)."""
    if not origin:
        return False
    parts = urlsplit(origin.strip().lower())
    origin_host = _host_port(parts.netloc) if parts.scheme in ("http", "https") else None
    if origin_host is None:
        return False
    own = _host_port(host or "")
    if own is not None and own[1] == origin_host[1] and validate_host(own[0], _allowed_hosts()):
        return True
    return _trusted(parts.scheme, origin_host[1])


class SameOriginValidator:
    """ASGI middleware for the websocket route: refuses (HTTP 403) a handshake origin_allowed() refuses."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        headers = {name: value.decode("latin1") for name, value in scope.get("headers", [])}
        if origin_allowed(headers.get(b"origin"), headers.get(b"host")):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
