from django.contrib import admin

from tenants.admin.scoping import ReadOnlyAdmin
from tenants.models import ApiUsage


@admin.register(ApiUsage)
class ApiUsageAdmin(ReadOnlyAdmin):
    """One row per /v1 call (written by the api app): who, what, tokens, latency and how it ended."""

    list_display = ["created_at", "tenant", "api_key", "endpoint", "model", "status_code", "num_prompt_tokens",
                    "num_cached_tokens", "num_output_tokens", "latency_ms"]
    list_filter = ["endpoint", "status_code", "tenant"]
    list_select_related = ["tenant", "api_key"]
    search_fields = ["request_id", "model", "api_key__name", "api_key__prefix"]
    date_hierarchy = "created_at"

    def get_list_filter(self, request):
        return self.list_filter if request.user.is_superuser else ["endpoint", "status_code"]
