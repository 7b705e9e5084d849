"""OpenAI's wire format: the JSON bodies and SSE events of chat completions and completions.

Plain dicts (api.schemas documents the same shapes for the OpenAPI schema; a test keeps them equal).
"""
from __future__ import annotations

import json
from typing import Any


def sse(data: dict | str) -> str:
    """One Server-Sent Event: `data: <json>` and a blank line."""
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n"


SSE_DONE = sse("[DONE]")


# --- logprobs ---
def _token_text(tokenizer: Any, token_id: int) -> str:
    return tokenizer.decode([token_id])


def _top(entry: dict[int, float], k: int) -> list[tuple[int, float]]:
    """The k likeliest tokens of an engine logprobs entry ({token_id: logprob}: the sampled one and the top k)."""
    return sorted(entry.items(), key=lambda item: -item[1])[:k]


def chat_logprobs(tokenizer: Any, token_ids: list[int], logprobs: list[dict[int, float]], k: int) -> dict:
    """choices[i].logprobs of a chat completion: {"content": [{token, logprob, bytes, top_logprobs}]}."""
    content = []
    for token_id, entry in zip(token_ids, logprobs):
        token = _token_text(tokenizer, token_id)
        content.append({
            "token": token,
            "logprob": entry[token_id],
            "bytes": list(token.encode()),
            "top_logprobs": [
                {"token": (text := _token_text(tokenizer, t)), "logprob": lp, "bytes": list(text.encode())}
                for t, lp in _top(entry, k)
            ],
        })
    return {"content": content}


def completion_logprobs(tokenizer: Any, token_ids: list[int], logprobs: list[dict[int, float]], k: int,
                        text_offset: int = 0) -> dict:
    """choices[i].logprobs of a completion: parallel lists tokens / token_logprobs / top_logprobs / text_offset.
    An entry None (an echoed prompt's first token: nothing precedes it) gives null logprobs."""
    result: dict[str, list] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for token_id, entry in zip(token_ids, logprobs):
        token = _token_text(tokenizer, token_id)
        result["tokens"].append(token)
        result["token_logprobs"].append(None if entry is None else entry[token_id])
        result["top_logprobs"].append(None if entry is None else
                                      {_token_text(tokenizer, t): lp for t, lp in _top(entry, k)})
        result["text_offset"].append(text_offset)
        text_offset += len(token)
    return result


# --- chat completions ---
def chat_choice(index: int, text: str, finish_reason: str | None, logprobs: dict | None = None) -> dict:
    return {"index": index, "message": {"role": "assistant", "content": text}, "logprobs": logprobs,
            "finish_reason": finish_reason}


def chat_completion(request_id: str, created: int, model: str, choices: list[dict], usage: dict) -> dict:
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": choices,
        "usage": usage,
    }


def chat_chunk(request_id: str, created: int, model: str, delta: dict, *, index: int = 0,
               finish_reason: str | None = None, logprobs: dict | None = None, with_usage: bool = False) -> dict:
    """A chunk with one choice. With include_usage, every chunk carries "usage": null but the last."""
    chunk = {
        "id": request_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}],
    }
    if with_usage:
        chunk["usage"] = None
    return chunk


def chat_usage_chunk(request_id: str, created: int, model: str, usage: dict) -> dict:
    return {"id": request_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [], "usage": usage}


# --- completions ---
def completion_choice(index: int, text: str, finish_reason: str | None, logprobs: dict | None = None) -> dict:
    return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}


def completion(request_id: str, created: int, model: str, choices: list[dict], usage: dict | None) -> dict:
    """A completion, or one streamed chunk of it (same shape; usage None but in the last)."""
    return {
        "id": request_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": choices,
        "usage": usage,
    }


def completion_usage_chunk(request_id: str, created: int, model: str, usage: dict) -> dict:
    return {"id": request_id, "object": "text_completion", "created": created, "model": model,
            "choices": [], "usage": usage}


def stream_error(error_body: dict) -> str:
    """A failure after the stream began: an event with OpenAI's error object (the client raises it)."""
    return sse(error_body)
