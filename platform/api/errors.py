"""Errors of the /v1 API in OpenAI's shape, and the one place engine and platform errors become HTTP.

    {"error": {"message": "...", "type": "invalid_request_error", "param": "temperature", "code": null}}

The official clients key on the status (401 AuthenticationError, 403 PermissionDeniedError, 400
BadRequestError, 404 NotFoundError, 429 RateLimitError, 5xx InternalServerError) and read the body.
"""
from __future__ import annotations

import math
import re

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import JsonResponse

from engine_runtime import EngineUnavailable
from governance.budgets import QuotaExceeded
from inference.errors import EngineDeadError, EngineError, InvalidRequestError, PromptTooLongError, QueueFullError

# Seconds a client should wait before retrying while the engine loads or its queue is full.
ENGINE_RETRY_AFTER_S = 5


class ApiError(Exception):
    """An error answer: HTTP status plus OpenAI's message / type / param / code (and extra headers)."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.retry_after = retry_after

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def headers(self) -> dict[str, str]:
        if self.retry_after is None:
            return {}
        # Retry-After takes whole seconds (rounded up, so a client never retries too early); the
        # official clients prefer the precise retry-after-ms when present.
        return {"Retry-After": str(max(1, math.ceil(self.retry_after))),
                "retry-after-ms": str(max(1, math.ceil(self.retry_after * 1000)))}


def invalid(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def rate_limited(message: str, retry_after: float, code: str = "rate_limit_exceeded") -> ApiError:
    return ApiError(429, message, type="rate_limit_error", code=code, retry_after=retry_after)


def model_not_found(model: str) -> ApiError:
    return ApiError(404, f"The model `{model}` does not exist or you do not have access to it.",
                    param="model", code="model_not_found")


def context_too_long(message: str, param: str) -> ApiError:
    return ApiError(400, message, param=param, code="context_length_exceeded")


def to_api_error(exc: BaseException, param_names: dict[str, str] | None = None) -> ApiError:
    """Map an engine or runtime exception to its answer. `param_names` renames engine fields to the
    request's (the engine says max_tokens where the client sent max_completion_tokens)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, QuotaExceeded):  # a token budget is spent (OpenAI's answer when credit runs out)
        return ApiError(429, exc.message, type="insufficient_quota", code="insufficient_quota")
    if isinstance(exc, PromptTooLongError):
        return context_too_long(str(exc), (param_names or {}).get("prompt", "prompt"))
    if isinstance(exc, InvalidRequestError):
        field = exc.field
        return invalid(str(exc), (param_names or {}).get(field, field) if field else None, code="invalid_value")
    if isinstance(exc, QueueFullError):
        return rate_limited(f"The engine is overloaded: {exc}", ENGINE_RETRY_AFTER_S, code="engine_overloaded")
    if isinstance(exc, EngineUnavailable):
        return ApiError(503, f"The engine is not ready: {exc.reason}", type="server_error",
                        code="engine_unavailable", retry_after=ENGINE_RETRY_AFTER_S)
    if isinstance(exc, EngineDeadError):
        return ApiError(503, f"The engine stopped: {exc}", type="server_error", code="engine_unavailable",
                        retry_after=ENGINE_RETRY_AFTER_S)
    if isinstance(exc, EngineError):
        return ApiError(500, f"The engine failed: {exc}", type="server_error", code="engine_error")
    if isinstance(exc, RequestDataTooBig):  # over DATA_UPLOAD_MAX_MEMORY_SIZE: the client's error, not ours
        return ApiError(413, "The request body is too large.", code="request_too_large")
    if isinstance(exc, DatabaseError):  # the database went away (or refuses us): retry, nothing was half-written
        return ApiError(503, "The database is unavailable; try again shortly.", type="server_error",
                        code="database_unavailable", retry_after=ENGINE_RETRY_AFTER_S)
    return ApiError(500, "Internal server error.", type="server_error", code="internal_error")


# What the views catch and hand to to_api_error (anything else is a bug: a 500 with a logged traceback).
EXPECTED_ERRORS = (ApiError, EngineError, EngineUnavailable, QuotaExceeded)


def error_response(error: ApiError) -> JsonResponse:
    response = JsonResponse(error.body(), status=error.status)
    for name, value in error.headers().items():
        response[name] = value
    return response


# The member of a union that Pydantic tried ("str", "list[int]", "function-after[...]"): not a field name.
_UNION_TAG = re.compile(r"(str|int|float|bool|none|dict|list|[a-z-]+\[.*\])")


def param_from_loc(loc: tuple | list) -> str | None:
    """A Pydantic error location as OpenAI names a param: ("body", "body", "messages", 0, "role") -> messages[0].role,
    ("body", "body", "prompt", "list[int]", 0) -> prompt[0]."""
    parts = [p for p in loc if p not in ("body", "payload") and not (isinstance(p, str) and _UNION_TAG.fullmatch(p))]
    param = ""
    for part in parts:
        param += f"[{part}]" if isinstance(part, int) else (f".{part}" if param else str(part))
    return param or None
