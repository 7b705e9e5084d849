from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "OpenAI-compatible API"

    def ready(self) -> None:
        from api.models import ApiKey
        from inference.tool_parsers import get_tool_parser
        from pagoda import ttl_cache

        ttl_cache.clear_on_change(ApiKey)  # a revoked or changed key stops working at once here

        if settings.PAGODA_TOOL_PARSER:  # a typo must stop the server, not fail every tool call
            try:
                get_tool_parser(settings.PAGODA_TOOL_PARSER)
            except ValueError as exc:
                raise ImproperlyConfigured(f"PAGODA_TOOL_PARSER: {exc}") from None
