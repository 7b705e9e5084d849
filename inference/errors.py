"""The engine's error types: one per kind of bad input or failure, mapped once to HTTP/WS errors at the edge."""


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class InvalidRequestError(EngineError, ValueError):
    """A request or parameter is invalid. `field` names the offending field when there is one."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class PromptTooLongError(InvalidRequestError):
    """The prompt (plus the tokens asked for) does not fit the model's context."""


class PinCapacityError(EngineError):
    """Pinning this prefix would exceed the cap on pinned KV blocks."""


class EngineDeadError(EngineError):
    """The engine loop is not running (stopped or crashed); `reason` says why."""


class QueueFullError(EngineError):
    """Too many requests are waiting: the caller should retry later (HTTP 429)."""


class RequestFailedError(EngineError):
    """One request failed inside the engine (its step raised); the engine itself keeps serving."""
