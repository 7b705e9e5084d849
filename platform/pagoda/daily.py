"""Per-day token sums over any rows with num_prompt/cached/output_tokens and created_at: the one shape of
the usage tables (chat replies in chat.selectors, /v1 calls in api.selectors), so each app's selector
counts its own table and the console adds them up."""
import datetime

from django.db.models import QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone


def since(days: int, today: datetime.date | None) -> tuple[datetime.date, datetime.datetime]:
    """The first local day of a `days`-long window ending `today` (default: now), and its first instant."""
    today = today or timezone.localdate()
    first = today - datetime.timedelta(days=days - 1)
    return first, timezone.make_aware(datetime.datetime.combine(first, datetime.time.min))


def tokens_per_day(rows: QuerySet, first: datetime.date, days: int, **counts) -> list[dict]:
    """Rows with num_prompt/cached/output_tokens summed per local day from `first`, one row per day
    (zeros included), plus the `counts` aggregates under their names."""
    per_day = (
        rows.annotate(day=TruncDate("created_at", tzinfo=timezone.get_current_timezone()))
        .values("day")
        .annotate(
            **counts,
            prompt_tokens=Sum("num_prompt_tokens"),
            cached_tokens=Sum("num_cached_tokens"),
            output_tokens=Sum("num_output_tokens"),
        )
    )
    by_day = {row["day"]: row for row in per_day}
    result = []
    for offset in range(days):
        day = first + datetime.timedelta(days=offset)
        row = by_day.get(day, {})
        prompt, output = row.get("prompt_tokens") or 0, row.get("output_tokens") or 0
        result.append(
            {
                "day": day,
                **{name: row.get(name, 0) for name in counts},
                "prompt_tokens": prompt,
                "cached_tokens": row.get("cached_tokens") or 0,
                "output_tokens": output,
                "total_tokens": prompt + output,
            }
        )
    return result
