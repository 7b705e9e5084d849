"""Hermes-style calls, as Qwen2.5, Qwen3 and Hermes models write them (and Pagoda's generic tool prompt asks
for, see inference.tool_prompt):

    Let me check.<tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>
    <tool_call>
    {"name": "get_time", "arguments": {"zone": "CET"}}
    </tool_call>

Each block holds one JSON object. A block that does not hold a call (bad JSON, no name) is content,
as it was written. A last block left open by the end of the output counts if its JSON is whole.
"""
from __future__ import annotations

import json

from .base import ParsedOutput, ToolParser, call_from_object, marker_tail

START, END = "<tool_call>", "</tool_call>"


class HermesToolParser(ToolParser):
    name = "hermes"
    arguments_key = "arguments"

    def parse(self, text: str, final: bool = True) -> ParsedOutput:
        out = ParsedOutput()
        pos = 0
        while True:
            start = text.find(START, pos)
            if start == -1:
                rest = text[pos:]
                hold = 0 if final else marker_tail(rest, START)
                out.content += rest[:len(rest) - hold]
                break
            out.content += text[pos:start]
            body_start = start + len(START)
            end = text.find(END, body_start)
            if end == -1 and not final:
                break  # an open block: wait for its end
            body = text[body_start:] if end == -1 else text[body_start:end]
            call = _call(body)
            if call is None:  # not a call: the block stays text, as the model wrote it
                out.content += text[start:] if end == -1 else text[start:end + len(END)]
            else:
                out.calls.append(call)
            if end == -1:
                break
            pos = end + len(END)
        return out


def _call(body: str):
    try:
        return call_from_object(json.loads(body), "arguments")
    except ValueError:
        return None
