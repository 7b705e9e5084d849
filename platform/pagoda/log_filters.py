"""Logging filters named in settings.LOGGING."""
import logging

HEALTH_PATHS = frozenset({"/health"})


class HealthUnavailableAtInfo(logging.Filter):
    """Django's `django.request` logger writes every 5xx as ERROR. A 503 from /health is the expected
    answer while the model loads (or restarts), and load balancers poll it every few seconds: it is
    written at INFO instead, so a normal start shows no ERROR line. Other paths keep their level."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        if getattr(record, "status_code", None) != 503 or getattr(request, "path", None) not in HEALTH_PATHS:
            return True
        record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        # The logger let the record through as ERROR; at INFO it must pass the configured level too.
        return logging.getLogger(record.name).isEnabledFor(logging.INFO)
