"""Budget periods in the server's TIME_ZONE: a day runs from local midnight, a month from the 1st."""
import datetime

from django.utils import timezone


def period_bounds(period: str, now: datetime.datetime | None = None) -> tuple[datetime.datetime, datetime.datetime]:
    """(start, end) of the day or month holding `now`; a budget resets at `end`."""
    now = timezone.localtime(now or timezone.now())
    day = now.date()
    if period == "day":
        first, after = day, day + datetime.timedelta(days=1)
    elif period == "month":
        first = day.replace(day=1)
        after = (first + datetime.timedelta(days=32)).replace(day=1)
    else:
        raise ValueError(f"unknown budget period {period!r}")
    return _midnight(first), _midnight(after)


def month_bounds(month: str) -> tuple[datetime.datetime, datetime.datetime]:
    """'YYYY-MM' -> (start, end) of that calendar month. Raises ValueError for anything else."""
    try:
        first = datetime.datetime.strptime(month, "%Y-%m").date()
    except ValueError:
        raise ValueError(f"{month!r} is not a month written YYYY-MM") from None
    return period_bounds("month", _midnight(first))


def _midnight(day: datetime.date) -> datetime.datetime:
    return timezone.make_aware(datetime.datetime.combine(day, datetime.time.min))
