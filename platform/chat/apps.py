from django.apps import AppConfig


class ChatConfig(AppConfig):
    """The employees' chat: page, conversation history and the streaming WebSocket."""

    name = "chat"
    verbose_name = "Chat"

    def ready(self) -> None:
        from chat import signals  # noqa: F401 (offboarding closes open sockets: chat.signals)
