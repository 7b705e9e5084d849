"""WebSocket routes, collected from every installed app that has a `routing` module.

An app (e.g. `chat`) declares its routes in `<app>/routing.py`:
    websocket_urlpatterns = [path("ws/chat/<int:conversation_id>/", ChatConsumer.as_asgi())]
asgi.py wraps them in ws_origin.SameOriginValidator + AuthMiddlewareStack.
"""
from importlib import import_module
from importlib.util import find_spec

from django.apps import apps


def collect_websocket_urlpatterns() -> list:
    """The concatenated `websocket_urlpatterns` of all installed apps, in INSTALLED_APPS order."""
    patterns: list = []
    for config in apps.get_app_configs():
        module_name = f"{config.name}.routing"
        if find_spec(module_name) is None:
            continue
        patterns.extend(getattr(import_module(module_name), "websocket_urlpatterns", []))
    return patterns
