"""What every tool-call parser shares: the call, the parse result, and the rules of a parse.

A parser reads the text a model generated and splits it into plain content and tool calls, in its
family's format. One method does it for both paths:

    parser.parse(text)               # the whole output: content and calls (a malformed call is content)
    parser.parse(text, final=False)  # a stream's text so far: what is already decided

While streaming, the text that might still become a call (a marker's first characters, a call not yet
closed) is held back, so the content and calls of `parse(prefix, final=False)` are always a prefix of
those of `parse(text)`: a stream never has to take back what it sent.
"""
from __future__ import annotations

import json
import secrets
import string
from dataclasses import dataclass, field
from typing import Any

_ID_ALPHABET = string.ascii_letters + string.digits


@dataclass
class ToolCall:
    """One call: the function's name and its arguments as JSON text (as OpenAI's `function.arguments`)."""

    name: str
    arguments: str


@dataclass
class ParsedOutput:
    """The content (text outside calls; '' if none) and the calls, in the order they were generated."""

    content: str = ""
    calls: list[ToolCall] = field(default_factory=list)


def marker_tail(text: str, marker: str) -> int:
    """How many characters at the end of `text` could be the start of `marker` (to hold back)."""
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:size]):
            return size
    return 0


def call_from_object(obj: Any, arguments_key: str) -> ToolCall | None:
    """{"name": str, <arguments_key>: object or JSON text} -> a ToolCall; None for anything else."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    arguments = obj.get(arguments_key, {})
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(obj["name"], json.dumps(arguments, ensure_ascii=False))


def json_values(text: str) -> list[tuple[Any, int]]:
    """The JSON values at the start of `text`, separated by whitespace, commas or semicolons, each with
    the position where it ends; the list stops before the first text that is not (or not yet) a whole
    JSON value."""
    decoder = json.JSONDecoder()
    values, pos = [], 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,;":
            pos += 1
        try:
            value, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return values
        values.append((value, pos))


class ToolParser:
    """A family's tool-call format. Subclasses set `name`, `arguments_key` and implement `parse`."""

    name = ""
    arguments_key = "arguments"  # the key of the arguments in the family's call object
    skip_special_tokens = True  # False when the family's marker is a special token the text must keep

    def parse(self, text: str, final: bool = True) -> ParsedOutput:
        raise NotImplementedError

    def new_call_id(self) -> str:
        """A tool call id as OpenAI writes them."""
        return "call_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24))

    def required_schema(self, functions: list[dict], parallel: bool) -> dict:
        """The JSON schema of a `tool_choice: "required"` answer: a list of one call (or, with parallel
        calls, of one or more), each `{"name": ..., <arguments_key>: ...}` of one of `functions`
        (OpenAI function objects: name, parameters). The grammar engine holds the output to it."""
        calls = [{"type": "object",
                  "properties": {"name": {"const": f["name"]},
                                 self.arguments_key: f.get("parameters") or {"type": "object"}},
                  "required": ["name", self.arguments_key], "additionalProperties": False}
                 for f in functions]
        schema: dict = {"type": "array", "items": calls[0] if len(calls) == 1 else {"anyOf": calls},
                        "minItems": 1}
        if not parallel:
            schema["maxItems"] = 1
        return schema

    def parse_required(self, text: str, final: bool = True) -> list[ToolCall]:
        """The calls of a `required` answer (a JSON list, see required_schema); while streaming, the
        elements complete so far."""
        start = text.find("[")
        if start == -1:
            return []
        calls = [call_from_object(v, self.arguments_key) for v, _ in json_values(text[start + 1:])]
        return [c for c in calls if c is not None]
