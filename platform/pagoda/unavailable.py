"""The one HTTP answer for a database that could not serve a request in time: 503 with Retry-After.

Django's handler500 (pagoda.urls) calls `server_error` for any exception a page request raised, in the
view or in a middleware (the session saved on the way out); a database that was unavailable
(pagoda.db.is_unavailable: gone, locked past the busy timeout, no pooled connection in time) gets
`unavailable_response` instead of the 500 page. The request queue (pagoda.db_queue) answers the same
when a request waited too long for its turn. The /v1 API answers these itself, in OpenAI's shape
(api.errors), with the same code and Retry-After.

Nothing is half-saved by such an answer: a view's writes that share a transaction roll back together,
and the session middleware saves no session (and sets no cookie) on a 5xx, so a login that failed
here leaves the browser logged out, free to retry.
"""
from __future__ import annotations

import logging
import sys

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views import defaults

from pagoda.db import RETRY_AFTER_S, is_unavailable

logger = logging.getLogger(__name__)

MESSAGE = "The database is busy or unavailable; try again shortly."


def _wants_json(request: HttpRequest) -> bool:
    accept = request.headers.get("Accept", "")
    return request.path.startswith("/v1/") or ("json" in accept and "text/html" not in accept)


def unavailable_response(request: HttpRequest) -> HttpResponse:
    """503 + Retry-After: JSON {"error": {...,"code": "database_unavailable"}} for programs, else a plain
    page. Renders without the request's context: the context processors would query the database again."""
    if _wants_json(request):
        response = JsonResponse({"error": {"message": MESSAGE, "type": "server_error", "param": None,
                                           "code": "database_unavailable"}}, status=503)
    else:
        response = HttpResponse(render_to_string("503.html", {"retry_after_s": RETRY_AFTER_S}), status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: the 503 above when the exception being handled says the database was unavailable,
    else Django's 500 page. (Django calls it inside the except block, in a thread under ASGI; asgiref
    carries the exception into that thread, so sys.exc_info() holds it.)"""
    exc = sys.exc_info()[1]
    if is_unavailable(exc):
        logger.warning("database unavailable for %s %s: %s", request.method, request.path, exc)
        return unavailable_response(request)
    return defaults.server_error(request)
