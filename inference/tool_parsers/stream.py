"""A tool-call parse as the text streams in: what each new piece of text decides.

    stream = ToolCallStream(parser)                  # tool_choice auto: the family's format
    stream = ToolCallStream(parser, required=True)   # tool_choice required: a JSON list of calls
    content, calls = stream.feed(delta_text)         # content to send now, calls completed now
    content, calls = stream.feed("", final=True)     # at the end

Each feed re-parses the text so far (parser.parse(text, final=False)) and hands out only what is new,
so the streamed content and calls add up to what the whole text parses to. Whitespace at the end of
the content waits for more content: once the output has calls, trailing whitespace is not content
(`final_content` gives the non-streamed answer the same rule).
"""
from __future__ import annotations

from .base import ToolCall, ToolParser


def final_content(content: str, has_calls: bool) -> str | None:
    """The message content beside the calls: None when there is none (OpenAI's null), right-stripped
    when there are calls; as written when there are none."""
    if not has_calls:
        return content
    return content.rstrip() or None


class ToolCallStream:
    def __init__(self, parser: ToolParser, required: bool = False):
        self.parser = parser
        self.required = required
        self.text = ""
        self.num_content_sent = 0  # characters of the parsed content handed out
        self.num_calls_sent = 0

    def feed(self, text: str, final: bool = False) -> tuple[str, list[ToolCall]]:
        self.text += text
        if self.required:  # the grammar allows nothing but the list: there is no content
            calls = self.parser.parse_required(self.text, final)
            content = ""
        else:
            parsed = self.parser.parse(self.text, final)
            calls, content = parsed.calls, parsed.content
        end = len(content) if final and not calls else len(content.rstrip())
        fragment = content[self.num_content_sent:end] if end > self.num_content_sent else ""
        self.num_content_sent = max(self.num_content_sent, end)
        new_calls = calls[self.num_calls_sent:]
        self.num_calls_sent = len(calls)
        return fragment, new_calls
