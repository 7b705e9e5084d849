"""Llama 3.1+ JSON calls, as Meta's chat template asks for them (`<|python_tag|>` is optional; it is a
special token, kept in the text for this parser):

    {"name": "get_weather", "parameters": {"city": "Paris"}}
    Let me look.<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": ...}

The calls begin the output, or follow `<|python_tag|>`. Calls may be separated by `;`, commas or new
lines. JSON that is not a call (a model may answer in JSON of its own) is content, as written, and so
is whatever follows the last call.
"""
from __future__ import annotations

from .base import ParsedOutput, ToolParser, call_from_object, json_values, marker_tail

TAG = "<|python_tag|>"


class Llama3JsonToolParser(ToolParser):
    name = "llama3_json"
    arguments_key = "parameters"
    skip_special_tokens = False

    def parse(self, text: str, final: bool = True) -> ParsedOutput:
        tag = text.find(TAG)
        if tag != -1:
            content, body = text[:tag], text[tag + len(TAG):]
        elif text.lstrip().startswith("{"):
            content, body = "", text
        elif not final and not text.strip():
            return ParsedOutput()  # nothing but whitespace yet: a call may still begin
        else:
            return ParsedOutput(text if final else text[:len(text) - marker_tail(text, TAG)])
        calls, end = [], 0
        for value, value_end in json_values(body):
            call = call_from_object(value, self.arguments_key)
            if call is None:
                break
            calls.append(call)
            end = value_end
        if not calls:
            return ParsedOutput(text) if final else ParsedOutput(content)  # while streaming: wait
        rest = body[end:].lstrip(" \t\r\n,;")
        return ParsedOutput(content + rest if final else content, calls)
