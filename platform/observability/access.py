"""Who may read /metrics: an allowed address (PAGODA_METRICS_ALLOWED_IPS) or the bearer token.

PAGODA_METRICS_ALLOWED_IPS holds addresses or networks ("127.0.0.1", "::1", "10.0.0.0/8"); the
address checked is REMOTE_ADDR, the peer of this server. X-Forwarded-For is never trusted: behind
a reverse proxy, either allow the proxy's address (and let the proxy decide), or set
PAGODA_METRICS_TOKEN and have Prometheus send `Authorization: Bearer <token>`.
"""
import ipaddress
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest
from django.utils.crypto import constant_time_compare

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def address_allowed(address: str, entries: list[str] | tuple[str, ...]) -> bool:
    """True if `address` lies in one of `entries` (IPs or CIDR networks); an IPv4-mapped IPv6
    address counts as its IPv4 address."""
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip.version == net.version and ip in net for net in _networks(tuple(entries)))


def token_matches(request: HttpRequest, token: str) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return bool(token) and scheme.lower() == "bearer" and constant_time_compare(given.strip(), token)


def metrics_allowed(request: HttpRequest) -> bool:
    """The request comes from an allowed address, or carries the metrics token."""
    if token_matches(request, settings.PAGODA_METRICS_TOKEN):
        return True
    return address_allowed(request.META.get("REMOTE_ADDR", ""), settings.PAGODA_METRICS_ALLOWED_IPS)
