from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "OpenAI-compatible API"

    def ready(self) -> None:
        from api.models import ApiKey
        from pagoda import ttl_cache

        ttl_cache.clear_on_change(ApiKey)  # a revoked or changed key stops working at once here
