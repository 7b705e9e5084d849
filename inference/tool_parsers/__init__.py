"""Tool-call parsers: one module per family's format, chosen from the model's chat template.

    parser = tool_parser_for(tokenizer)          # or get_tool_parser("hermes" | "llama3_json" | "mistral")
    parsed = parser.parse(text)                  # ParsedOutput(content, calls)

They live in the engine package, beside inference.tool_prompt (which renders tools into a prompt), so an
offline script parses the calls of `LLM.chat(..., tools=...)` the same way the server does.
"""
from __future__ import annotations

from typing import Any

from .base import ParsedOutput, ToolCall, ToolParser
from .hermes import HermesToolParser
from .llama3_json import Llama3JsonToolParser
from .mistral import MistralToolParser

PARSERS: dict[str, type[ToolParser]] = {p.name: p for p in (HermesToolParser, Llama3JsonToolParser,
                                                             MistralToolParser)}

__all__ = ["PARSERS", "ParsedOutput", "ToolCall", "ToolParser", "detect_tool_parser", "get_tool_parser",
           "tool_parser_for"]


def get_tool_parser(name: str) -> ToolParser:
    """The parser named `name`; ValueError naming the choices for any other."""
    if name not in PARSERS:
        raise ValueError(f"unknown tool parser {name!r}; choose one of {', '.join(sorted(PARSERS))}")
    return PARSERS[name]()


def detect_tool_parser(chat_template: str | None) -> str:
    """The parser a chat template's own tool format calls for. A template that knows no tool format
    gets Pagoda's generic tool prompt (inference.tool_prompt), which asks for Hermes-style calls."""
    template = chat_template or ""
    if "[TOOL_CALLS]" in template:
        return "mistral"
    if "<|python_tag|>" in template or ('"parameters"' in template and "ipython" in template):
        return "llama3_json"
    return "hermes"


def tool_parser_for(tokenizer: Any, override: str | None = None) -> ToolParser:
    """The parser of a model (from its tokenizer's chat template), or the one `override` names."""
    return get_tool_parser(override or detect_tool_parser(getattr(tokenizer, "chat_template", None)))
