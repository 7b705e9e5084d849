"""The API's own ASGI handler: Django's, with only the middleware an API call needs (pagoda.asgi routes
/v1/, /tokenize and /detokenize here).

Why: under ASGI every middleware written the synchronous way (Django's own: sessions, CSRF, locale,
auth, messages, ...) runs each of its hooks through sync_to_async, one hop to a worker thread and
back per hook, and the page stack has fifteen such hooks. An API call authenticates with its Bearer
key and needs none of them; their hops were a large part of the time before a call's first token
(benchmarks.serve.webpath). What the API keeps runs in the event loop:

- the security headers and the HTTPS redirect of SecurityMiddleware (its hooks only read settings
  and set headers, so they are called inline);
- the X-Pagoda-Replica header (pagoda.middleware; the routing cookie is for sessions, which API
  calls do not have).
"""
from __future__ import annotations

from asgiref.sync import markcoroutinefunction
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response
from django.middleware.security import SecurityMiddleware
from django.utils.module_loading import import_string

from pagoda.middleware import tag_replica

# Paths served by this handler: the API under /v1/, and the tokenizer routes vLLM serves at the root.
API_PATHS = ("/v1/", "/tokenize", "/detokenize")


def is_api_path(path: str) -> bool:
    return path.startswith(API_PATHS[0]) or path.rstrip("/") in API_PATHS[1:]


class SecurityHeaders:
    """SecurityMiddleware's redirect and headers, run in the event loop (no thread hop)."""

    sync_capable = False
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.security = SecurityMiddleware(get_response)
        markcoroutinefunction(self)

    async def __call__(self, request):
        response = self.security.process_request(request) or await self.get_response(request)
        return self.security.process_response(request, response)


class ReplicaHeader:
    """The X-Pagoda-Replica header (pagoda.middleware), without the routing cookie of sessions."""

    sync_capable = False
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        markcoroutinefunction(self)

    async def __call__(self, request):
        return tag_replica(await self.get_response(request))


class ApiASGIHandler(ASGIHandler):
    """ASGIHandler whose middleware chain is MIDDLEWARE below (outermost first), every one async."""

    MIDDLEWARE = ("api.asgi.SecurityHeaders", "api.asgi.ReplicaHeader")

    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        handler = convert_exception_to_response(self._get_response_async)
        for path in reversed(self.MIDDLEWARE):
            middleware = import_string(path)
            if not getattr(middleware, "async_capable", False):
                raise TypeError(f"{path} must be async-capable: the API handler runs no middleware in threads")
            handler = convert_exception_to_response(middleware(handler))
        self._middleware_chain = handler


class ApiRouter:
    """ASGI: HTTP requests for API paths go to `api_app`, everything else to `app`."""

    def __init__(self, app, api_app):
        self.app = app
        self.api_app = api_app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and is_api_path(scope.get("path", "")):
            return await self.api_app(scope, receive, send)
        return await self.app(scope, receive, send)
