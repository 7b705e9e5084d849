"""The console's usage table: chat replies (chat app) and /v1 calls (api app) per day, added up."""
import datetime

from api import selectors as api_selectors
from chat import selectors as chat_selectors
from tenants.models import Tenant


def usage_overview(tenant: Tenant, *, days: int = 14, today: datetime.date | None = None) -> list[dict]:
    """Chat replies (chat usage_by_day) and API calls (api_usage_by_day) per day, added up.

    Rows: {"day", "num_replies", "num_api_requests", "prompt_tokens", "cached_tokens", "output_tokens",
    "total_tokens", "api_tokens"}; the token columns are the sums of both sources, api_tokens the API's share.
    """
    chat = chat_selectors.usage_by_day(tenant, days=days, today=today)
    api = api_selectors.api_usage_by_day(tenant, days=days, today=today)
    return [
        {
            "day": c["day"],
            "num_replies": c["num_replies"],
            "num_api_requests": a["num_requests"],
            **{k: c[k] + a[k] for k in ("prompt_tokens", "cached_tokens", "output_tokens", "total_tokens")},
            "api_tokens": a["total_tokens"],
        }
        for c, a in zip(chat, api)
    ]
