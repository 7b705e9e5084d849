"""Structured request logs: one JSON line per finished request on the logger "pagoda.requests".

Fields (see RequestRecorder.finish): event, request_id, source, tenant, profile, finish_reason,
prompt_tokens, completion_tokens, cached_tokens, ttft_s and duration_s (from the server's arrival of
the request), engine_ttft_s = queue_s + prefill_s (the engine's own clock), num_preemptions, error, plus whatever the caller passed as `extra`. The prompt and the completion are added as
`prompt` / `completion` only when settings.PAGODA_LOG_CONTENT is true (off by default: chats hold
company data, and log pipelines are read by more people than the chats are).

settings.LOGGING sends "pagoda.requests" through JsonFormatter to stderr, without propagating to
the root logger (which would print it a second time, as plain text).
"""
import json
import logging
from datetime import datetime, timezone

from django.conf import settings

REQUEST_LOGGER = "pagoda.requests"
FIELDS_ATTR = "pagoda_fields"  # the LogRecord attribute that carries the fields

logger = logging.getLogger(REQUEST_LOGGER)


def log_content_enabled() -> bool:
    return bool(getattr(settings, "PAGODA_LOG_CONTENT", False))


def log_request(fields: dict) -> None:
    """Write one request's fields (JSON-serialisable values) as one log record."""
    logger.info("request %s %s", fields.get("request_id"), fields.get("finish_reason"),
                extra={FIELDS_ATTR: fields})


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts (UTC, ISO 8601), level, logger, then the record's fields
    (or `message` for a record logged without any)."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
        }
        fields = getattr(record, FIELDS_ATTR, None)
        if isinstance(fields, dict):
            line.update(fields)
        else:
            line["message"] = record.getMessage()
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)
