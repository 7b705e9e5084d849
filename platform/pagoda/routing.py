"""WebSocket routes, collected from every installed app that has a `routing` module.

An app (e.g. `chat`) declares its routes in `<app>/routing.py`:
    websocket_urlpatterns = [path("ws/chat/<int:conversation_id>/", ChatConsumer.as_asgi())]
asgi.py wraps them in ws_origin.SameOriginValidator + AuthMiddlewareStack.

A socket to any other path (/ws/chat/abc/) is refused at the handshake (HTTP 403), as an unknown
page is a 404: without a last route, Channels' router raises and the server answers 500.
"""
from importlib import import_module
from importlib.util import find_spec

from channels.generic.websocket import AsyncWebsocketConsumer
from django.apps import apps
from django.urls import re_path


class UnknownPathConsumer(AsyncWebsocketConsumer):
    """Refuses the handshake: closing before accepting makes the server answer 403."""

    async def connect(self) -> None:
        await self.close()


def collect_websocket_urlpatterns() -> list:
    """The concatenated `websocket_urlpatterns` of all installed apps, in INSTALLED_APPS order."""
    patterns: list = []
    for config in apps.get_app_configs():
        module_name = f"{config.name}.routing"
        if find_spec(module_name) is None:
            continue
        patterns.extend(getattr(import_module(module_name), "websocket_urlpatterns", []))
    patterns.append(re_path(r"", UnknownPathConsumer.as_asgi()))  # last: any path no app claims
    return patterns
