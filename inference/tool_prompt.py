"""Tools in a chat prompt: through the model's chat template when it renders them, else Pagoda's generic
tool prompt.

A template that knows tools (Qwen2.5/3, Llama 3.1+, Mistral) gets them as Hugging Face's
`apply_chat_template(tools=...)` takes them, with the history as it is: assistant turns carrying
`tool_calls` (arguments as objects) and `tool` turns. A template that ignores tools (SmolLM2's) would
drop them silently, so the conversation is rewritten for it instead, in the Hermes style that
inference.tool_parsers.hermes reads back:

- the tools and how to call them are appended to the first system turn (a system turn is made if there
  is none), so a tenant's system prompt keeps coming first;
- an assistant turn's calls become `<tool_call>{"name": ..., "arguments": ...}</tool_call>` blocks after
  its text;
- `tool` turns become one user turn of `<tool_response>...</tool_response>` blocks (consecutive ones
  together), which any template accepts.
"""
from __future__ import annotations

import json
from typing import Any

_PROBE_MESSAGES = [{"role": "user", "content": "x"}]
_PROBE_TOOLS = [{"type": "function", "function": {"name": "pagoda_probe_tool", "description": "probe",
                                                  "parameters": {"type": "object", "properties": {}}}}]
_renders_tools: dict[int, bool] = {}  # id(tokenizer) -> whether its template renders tools

GENERIC_TOOLS_HEADER = (
    "# Tools\n\n"
    "You can call functions to help answer the user. The available functions, one JSON signature per "
    "line, are within <tools></tools>:\n<tools>\n{tools}\n</tools>\n\n"
    "To call a function, write a JSON object with its name and arguments within <tool_call></tool_call>, "
    "one block per call:\n"
    '<tool_call>\n{{"name": "<function name>", "arguments": <arguments as a JSON object>}}\n</tool_call>'
)


def template_renders_tools(tokenizer: Any, chat_template: str | None = None) -> bool:
    """Whether the chat template puts tools in the prompt (rendered once per tokenizer and compared)."""
    key = id(tokenizer) if chat_template is None else hash((id(tokenizer), chat_template))
    if key not in _renders_tools:
        def render(tools):
            return tokenizer.apply_chat_template(_PROBE_MESSAGES, tools=tools, chat_template=chat_template,
                                                 add_generation_prompt=True, tokenize=False)
        try:
            _renders_tools[key] = "pagoda_probe_tool" in render(_PROBE_TOOLS)
        except Exception:  # noqa: BLE001 - a template that cannot take tools does not render them
            _renders_tools[key] = False
    return _renders_tools[key]


def with_tools(tokenizer: Any, messages: list[dict], tools: list[dict] | None,
               chat_template: str | None = None) -> tuple[list[dict], list[dict] | None]:
    """(messages, tools) to hand the chat template: unchanged for a template that renders tools (call
    arguments as objects, as templates expect), or rewritten into the generic tool prompt (tools None)."""
    has_history = any(m.get("tool_calls") or m.get("role") == "tool" for m in messages)
    if not tools and not has_history:
        return messages, None
    if template_renders_tools(tokenizer, chat_template):
        return [_native(m) for m in messages], tools or None
    return _generic(messages, tools), None


def _arguments(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _native(message: dict) -> dict:
    if not message.get("tool_calls"):
        return message
    calls = [{**call, "function": {**call["function"], "arguments": _arguments(call["function"].get("arguments"))}}
             for call in message["tool_calls"]]
    return {**message, "content": message.get("content") or "", "tool_calls": calls}


def tool_call_block(name: str, arguments: Any) -> str:
    """One call as the generic prompt asks for it."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": _arguments(arguments)},
                                        ensure_ascii=False) + "\n</tool_call>"


def _generic(messages: list[dict], tools: list[dict] | None) -> list[dict]:
    out: list[dict] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            block = f"<tool_response>\n{message.get('content') or ''}\n</tool_response>"
            if out and out[-1].get("pagoda_tool_responses"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "pagoda_tool_responses": True})
        elif role == "assistant" and message.get("tool_calls"):
            blocks = [tool_call_block(c["function"]["name"], c["function"].get("arguments"))
                      for c in message["tool_calls"]]
            text = message.get("content") or ""
            out.append({"role": "assistant", "content": "\n".join(([text] if text else []) + blocks)})
        else:
            out.append(dict(message))
    for message in out:
        message.pop("pagoda_tool_responses", None)
    if tools:
        header = GENERIC_TOOLS_HEADER.format(tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
        if out and out[0].get("role") == "system":
            out[0] = {**out[0], "content": f"{out[0].get('content') or ''}\n\n{header}"}
        else:
            out.insert(0, {"role": "system", "content": header})
    return out
