"""Mistral calls, after the `[TOOL_CALLS]` token (a special token, kept in the text for this parser):

    [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", ...}]
    [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{"zone": "CET"}

The first form is the v3 tokenizers' (Mistral 7B v0.3, Nemo, Small 3), the second the newer ones'
(v11+). Text before the first marker is content; so is a list element that is not a call and what
follows it. An output that starts with `[{` is read as the first form (the marker was dropped).
Mistral's template accepts only 9-character alphanumeric call ids, so this parser makes those.
"""
from __future__ import annotations

import json
import secrets
import string

from .base import ParsedOutput, ToolCall, ToolParser, call_from_object, json_values, marker_tail

MARKER, ARGS = "[TOOL_CALLS]", "[ARGS]"
_ID_ALPHABET = string.ascii_letters + string.digits


class MistralToolParser(ToolParser):
    name = "mistral"
    arguments_key = "arguments"
    skip_special_tokens = False

    def new_call_id(self) -> str:
        return "".join(secrets.choice(_ID_ALPHABET) for _ in range(9))

    def parse(self, text: str, final: bool = True) -> ParsedOutput:
        marker = text.find(MARKER)
        if marker != -1:
            content, body = text[:marker], text[marker + len(MARKER):]
        elif text.lstrip().startswith("[{"):
            content, body = "", text
        elif not final and text.strip() in ("", "["):
            return ParsedOutput()  # a call list may still begin
        else:
            return ParsedOutput(text if final else text[:len(text) - marker_tail(text, MARKER)])
        items = body.lstrip()
        if items.startswith("["):
            calls, rest = _list_calls(items[1:])
        else:
            calls, rest = _named_calls(body)
        if not calls:
            return ParsedOutput(text) if final else ParsedOutput(content)  # while streaming: wait
        return ParsedOutput(content + rest if final else content, calls)


def _list_calls(items: str) -> tuple[list[ToolCall], str]:
    """The calls of `{...}, {...}]` and the text after them."""
    calls, end = [], 0
    for value, value_end in json_values(items):
        call = call_from_object(value, "arguments")
        if call is None:
            break
        calls.append(call)
        end = value_end
    rest = items[end:].lstrip(" \t\r\n,")
    return calls, rest[1:] if calls and rest.startswith("]") else rest


def _named_calls(body: str) -> tuple[list[ToolCall], str]:
    """The calls of `name[ARGS]{...}[TOOL_CALLS]name[ARGS]{...}` and the text after them."""
    calls: list[ToolCall] = []
    pos = 0
    while True:
        args_at = body.find(ARGS, pos)
        if args_at == -1:
            break
        name = body[pos:args_at].strip()
        values = json_values(body[args_at + len(ARGS):])
        if not name or not values or not isinstance(values[0][0], dict):
            break
        calls.append(ToolCall(name, json.dumps(values[0][0], ensure_ascii=False)))
        pos = args_at + len(ARGS) + values[0][1]
        if not body[pos:].lstrip().startswith(MARKER):
            break
        pos = body.index(MARKER, pos) + len(MARKER)
    return calls, body[pos:]
