"""What crosses between the engine core and its frontends: deltas as tuples, errors by type name."""
from __future__ import annotations

from . import errors
from .outputs import StreamDelta


def delta_to_tuple(d: StreamDelta) -> tuple:
    return (d.request_id, d.text, d.token_ids, d.finished, d.finish_reason, d.num_prompt_tokens,
            d.num_cached_tokens, d.num_output_tokens, d.stop_reason, d.logprobs, d.error, d.metrics, d.prompt_logprobs)


def delta_from_tuple(t: tuple) -> StreamDelta:
    return StreamDelta(*t)


def error_to_tuple(e: BaseException) -> tuple[str, str, str | None]:
    return (type(e).__name__, str(e), getattr(e, "field", None))


def error_from_tuple(t: tuple[str, str, str | None]) -> Exception:
    """The engine's own error types come back as themselves; anything else as RequestFailedError."""
    name, message, field = t
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, errors.InvalidRequestError):
        return cls(message, field=field)
    if isinstance(cls, type) and issubclass(cls, errors.EngineError):
        return cls(message)
    return errors.RequestFailedError(f"{name}: {message}")
