"""Mounted at /v1/ by pagoda.urls: the NinjaAPI's routes, its schema (/v1/openapi.json) and docs (/v1/docs)."""
from django.urls import path, re_path
from django.views.decorators.csrf import csrf_exempt

from api.views import api, not_found

urlpatterns = [
    path("", api.urls),
    re_path(r"^(?P<path>.*)$", csrf_exempt(not_found)),
]
