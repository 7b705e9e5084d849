"""What a replica adds to responses for the load balancer in front of it (deploy/nginx/pagoda.conf).

- `X-Pagoda-Replica: <PAGODA_REPLICA>`: which replica answered (operators, the replica tests).
- The `pagoda_tenant` cookie: the slug of the logged-in user's tenant, set once when it is missing.
  nginx hashes it (with the API key's tenant suffix and the X-Pagoda-Tenant header) to keep each
  tenant on one replica, where its prompt and its conversations' KV blocks stay cached. It is a
  routing hint only: the platform never reads it, so a stale or forged value only moves a user to
  another replica, which serves them just as well (all state is in the database).
"""
from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings

from tenants import selectors

ROUTING_COOKIE = "pagoda_tenant"
ROUTING_COOKIE_MAX_AGE_S = 30 * 24 * 3600
REPLICA_HEADER = "X-Pagoda-Replica"
# Paths whose requests carry no session worth routing by (the API routes by its key).
_NO_COOKIE_PREFIXES = ("/static/", "/v1/", "/health", "/metrics")


def routing_slug(user) -> str | None:
    """The tenant a user is routed by: the first of their active tenants by name (what "New chat" opens)."""
    return selectors.tenants_for_user(user).order_by("name").values_list("slug", flat=True).first()


class ReplicaRoutingMiddleware:
    """Adds the replica header and, for a logged-in user without one, the routing cookie. Sync and async."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        response = self.get_response(request)
        if self._wants_cookie(request) and request.user.is_authenticated:
            self._set_cookie(response, routing_slug(request.user))
        return self._tag(response)

    async def _acall(self, request):
        response = await self.get_response(request)
        if self._wants_cookie(request):
            user = await request.auser()
            if user.is_authenticated:
                self._set_cookie(response, await sync_to_async(routing_slug)(user))
        return self._tag(response)

    @staticmethod
    def _wants_cookie(request) -> bool:
        return ROUTING_COOKIE not in request.COOKIES and not request.path.startswith(_NO_COOKIE_PREFIXES)

    @staticmethod
    def _set_cookie(response, slug: str | None) -> None:
        if slug:
            response.set_cookie(ROUTING_COOKIE, slug, max_age=ROUTING_COOKIE_MAX_AGE_S, httponly=True,
                                samesite="Lax", secure=settings.SESSION_COOKIE_SECURE)

    @staticmethod
    def _tag(response):
        return tag_replica(response)


def tag_replica(response):
    """The response, with the X-Pagoda-Replica header when PAGODA_REPLICA names this replica."""
    if settings.PAGODA_REPLICA:
        response[REPLICA_HEADER] = settings.PAGODA_REPLICA
    return response
