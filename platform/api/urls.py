"""Mounted at /v1/ by pagoda.urls: the NinjaAPI's routes, its schema (/v1/openapi.json) and docs (/v1/docs).
`root_urlpatterns` (mounted at the root) serve /tokenize and /detokenize where vLLM serves them.

A method a route does not take (GET on /v1/chat/completions) is a 405 in OpenAI's error shape, with
the Allow header ninja sets; unknown paths are a 404 in the same shape.
"""
import functools

from asgiref.sync import iscoroutinefunction
from django.urls import URLPattern, path, re_path
from django.views.decorators.csrf import csrf_exempt

from api.errors import ApiError, error_response
from api.views import api, not_found, root_api


def _json_405(response, request):
    if response.status_code != 405:
        return response
    error = error_response(ApiError(405, f"Method {request.method} is not allowed on {request.path}; "
                                         f"use {response.get('Allow', 'another method')}.", code="method_not_allowed"))
    error["Allow"] = response.get("Allow", "")
    return error


def _with_json_405(view):
    if iscoroutinefunction(view):
        @functools.wraps(view)
        async def wrapped(request, *args, **kwargs):
            return _json_405(await view(request, *args, **kwargs), request)
    else:
        @functools.wraps(view)
        def wrapped(request, *args, **kwargs):
            return _json_405(view(request, *args, **kwargs), request)
    return wrapped


def _patterns(ninja_api) -> list:
    """The API's URL patterns, each view wrapped so that a 405 answers JSON."""
    patterns, app_name, namespace = ninja_api.urls
    wrapped = []
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            pattern = URLPattern(pattern.pattern, _with_json_405(pattern.callback), pattern.default_args, pattern.name)
        wrapped.append(pattern)
    return [path("", (wrapped, app_name, namespace))]


urlpatterns = [
    *_patterns(api),
    re_path(r"^(?P<path>.*)$", csrf_exempt(not_found)),
]

root_urlpatterns = _patterns(root_api)
