"""A tenant's month of ledger rows as CSV: one line per chat reply or API call, for chargeback."""
from __future__ import annotations

import csv
from typing import TextIO

from django.utils import timezone

from governance.periods import month_bounds
from governance.selectors import ledger

COLUMNS = ["created_at", "source", "tenant", "username", "api_key", "profile", "endpoint", "request_id", "status",
           "status_code", "error_code", "finish_reason", "prompt_tokens", "cached_tokens", "output_tokens",
           "total_tokens", "time_to_first_token_ms", "duration_ms", "conversation_id"]


def write_month(out: TextIO, tenant_id: int, month: str) -> int:
    """Write the header and the rows of `month` ('YYYY-MM', TIME_ZONE) to `out`; returns how many rows.
    Raises ValueError for a month not written YYYY-MM."""
    start, end = month_bounds(month)
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    count = 0
    for r in ledger(tenant_id, start, end).iterator():
        writer.writerow([timezone.localtime(r.created_at).isoformat(), r.source, r.tenant_slug, _text(r.username),
                         _text(r.api_key_name), _text(r.profile_name), r.endpoint, r.request_id, r.status,
                         "" if r.status_code is None else r.status_code, r.error_code, r.finish_reason,
                         r.num_prompt_tokens, r.num_cached_tokens, r.num_output_tokens, r.num_total_tokens,
                         _blank(r.time_to_first_token_ms), _blank(r.duration_ms), _blank(r.conversation_id)])
        count += 1
    return count


def _text(value: str) -> str:
    """A name as a spreadsheet shows it, never as a formula (a key named "=HYPERLINK(...)")."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def _blank(value) -> object:
    return "" if value is None else value
