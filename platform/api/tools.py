"""Tool calling in /v1/chat/completions: the request's tools and history checked, the call's mode, and
the answer's calls.

    plan = plan_tools(body)                  # None: no tools in play (none given, or tool_choice "none")
    params = plan.bind(engine, params)       # the family's parser; required / named: the grammar's schema
    content, calls = plan.parse(text)        # a whole answer ...
    stream = plan.stream()                   # ... or one streamed (ToolStream.feed -> chunk deltas)

Modes: "auto" lets the model write text or calls in its family's format, parsed by that family's parser
(inference.tool_parsers, chosen from the chat template or PAGODA_TOOL_PARSER). "required" and a named
function are held by the grammar engine to a JSON schema of the call, so the arguments always parse:
required answers a JSON list of `{"name", <the family's arguments key>}` objects (one, or several with
parallel_tool_calls), a named function answers its arguments object alone.

The history is checked before anything reaches the engine: an assistant message's calls (ids, names,
arguments that are a JSON object), and every tool message answering a call of the assistant message
before it (OpenAI's rule), each error a 400 naming the field.
"""
from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from api.errors import invalid
from api.schemas import ChatCompletionRequest, ChatMessage, TokenizeRequest
from inference import StructuredOutputsParams
from inference.tool_parsers import ToolCall, ToolParser, tool_parser_for
from inference.tool_parsers.stream import ToolCallStream, final_content

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass
class ResponseCall:
    """A call as the answer carries it: OpenAI's id, the name, the arguments' JSON text."""

    id: str
    name: str
    arguments: str

    def message(self) -> dict:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class ToolPlan:
    mode: str  # "auto" | "required" | "named"
    functions: dict[str, dict]  # name -> the OpenAI function object
    tools: list[dict]  # as the chat template takes them
    parallel: bool
    named: str | None = None
    parser: ToolParser | None = field(default=None, repr=False)  # set by bind()

    def bind(self, engine: Any, params):
        """The engine's parser; the request's SamplingParams with the call's constraint (required, named)
        or with the family's special tokens kept in the text (auto)."""
        self.parser = tool_parser_for(engine.tokenizer, settings.PAGODA_TOOL_PARSER or None)
        if self.mode == "auto":
            if not self.parser.skip_special_tokens:
                params = dataclasses.replace(params, skip_special_tokens=False)
            return params
        return constrain_to_json(params, self.schema())

    def schema(self) -> dict:
        if self.mode == "named":
            return self.functions[self.named].get("parameters") or {"type": "object"}
        return self.parser.required_schema(list(self.functions.values()), self.parallel)

    def _response_calls(self, calls: list[ToolCall]) -> list[ResponseCall]:
        if not self.parallel:
            calls = calls[:1]
        return [ResponseCall(self.parser.new_call_id(), c.name, c.arguments) for c in calls]

    def parse(self, text: str) -> tuple[str | None, list[ResponseCall]]:
        """A whole answer: (content, calls). Named and required answers are calls only."""
        if self.mode == "named":
            return None, [ResponseCall(self.parser.new_call_id(), self.named, text)]
        if self.mode == "required":
            return None, self._response_calls(self.parser.parse_required(text))
        parsed = self.parser.parse(text)
        calls = self._response_calls(parsed.calls)
        return final_content(parsed.content, bool(calls)), calls

    def stream(self) -> ToolStream:
        return ToolStream(self)


class ToolStream:
    """One choice's streamed answer: each feed returns the chunk deltas to send (content, or a call's
    first delta {index, id, type, function: {name, arguments: ""}} and then its argument fragments)."""

    def __init__(self, plan: ToolPlan):
        self.plan = plan
        self.calls = ToolCallStream(plan.parser, required=plan.mode == "required")
        self.num_calls = 0

    def feed(self, text: str, final: bool = False) -> list[dict]:
        if self.plan.mode == "named":
            return self._feed_named(text)
        content, calls = self.calls.feed(text, final)
        deltas = [{"content": content}] if content else []
        for call in calls:
            if self.num_calls and not self.plan.parallel:
                break
            deltas += self._call_deltas(ResponseCall(self.plan.parser.new_call_id(), call.name, call.arguments))
        return deltas

    def _feed_named(self, text: str) -> list[dict]:
        deltas = []
        if self.num_calls == 0:
            deltas += self._call_deltas(ResponseCall(self.plan.parser.new_call_id(), self.plan.named, ""))
        if text:
            deltas.append(_arguments_delta(0, text))
        return deltas

    def _call_deltas(self, call: ResponseCall) -> list[dict]:
        index = self.num_calls
        self.num_calls += 1
        first = {"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                 "function": {"name": call.name, "arguments": ""}}]}
        return [first, _arguments_delta(index, call.arguments)] if call.arguments else [first]

    @property
    def has_calls(self) -> bool:
        return self.num_calls > 0


def _arguments_delta(index: int, fragment: str) -> dict:
    return {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}


def constrain_to_json(params, schema: dict):
    """`params` held by the grammar engine to `schema` (compact JSON: no run of whitespace). A request
    that already constrains its answer (response_format, structured_outputs) cannot take a second one."""
    if getattr(params, "structured_outputs", None) is not None:
        raise invalid("tool_choice \"required\" or a named function already constrains the answer to a call; "
                      "drop response_format (or structured_outputs), or use tool_choice \"auto\".", "tool_choice")
    return dataclasses.replace(params, structured_outputs=StructuredOutputsParams(json=schema,
                                                                                  disable_any_whitespace=True))


# --- checking the request ---
def plan_tools(body: ChatCompletionRequest) -> ToolPlan | None:
    """Check tools, tool_choice and the history's calls; the plan, or None when no call can be made."""
    if body.functions is not None or body.function_call is not None:
        param = "functions" if body.functions is not None else "function_call"
        raise invalid(f"`{param}` is deprecated and not supported: use `tools` and `tool_choice`.", param,
                      code="unsupported_parameter")
    check_history(body.messages)
    functions = _functions(body.tools or [])
    choice = body.tool_choice
    if choice not in (None, "none", "auto") and not functions:
        raise invalid("tool_choice needs `tools`: there is no function to call.", "tool_choice")
    if not functions or choice == "none":
        return None
    tools = [{"type": "function", "function": f} for f in functions.values()]
    parallel = body.parallel_tool_calls is not False
    if choice in (None, "auto"):
        return ToolPlan("auto", functions, tools, parallel)
    if choice == "required":
        return ToolPlan("required", functions, tools, parallel)
    if choice.function.name not in functions:
        raise invalid(f"tool_choice names `{choice.function.name}`, which is not one of the tools "
                      f"({', '.join(functions)}).", "tool_choice.function.name")
    return ToolPlan("named", functions, tools, parallel=False, named=choice.function.name)


def tools_for_template(body: ChatCompletionRequest | TokenizeRequest) -> list[dict] | None:
    """The tools the prompt shows the model: all of them, even under tool_choice "none" (the history may
    refer to them), as the chat template takes them."""
    if not body.tools:
        return None
    return [{"type": "function", "function": t.function.model_dump(exclude_none=True)} for t in body.tools]


def _functions(tools: list) -> dict[str, dict]:
    functions: dict[str, dict] = {}
    for index, tool in enumerate(tools):
        function = tool.function.model_dump(exclude_none=True)
        name = function["name"]
        if not _NAME.fullmatch(name):
            raise invalid(f"Invalid function name {name!r}: use letters, digits, _ and -, at most 64 characters.",
                          f"tools[{index}].function.name", code="invalid_value")
        if name in functions:
            raise invalid(f"Two tools are named `{name}`.", f"tools[{index}].function.name", code="invalid_value")
        parameters = function.get("parameters")
        if parameters is not None and parameters.get("type", "object") != "object":
            raise invalid("A function's parameters must be a JSON schema of an object (\"type\": \"object\").",
                          f"tools[{index}].function.parameters", code="invalid_value")
        functions[name] = function
    return functions


def check_history(messages: list[ChatMessage]) -> None:
    """400 for an assistant call or a tool message OpenAI would refuse (see the module docstring)."""
    open_ids: set[str] = set()  # calls of the last assistant message not yet answered
    seen_ids: set[str] = set()
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if message.content is None and not (message.role == "assistant" and message.tool_calls):
            raise invalid("Each message needs `content` (null only in an assistant message with tool_calls).",
                          f"{where}.content")
        if open_ids and message.role != "tool":
            raise invalid(f"An assistant message with tool_calls must be followed by a tool message for each "
                          f"call; no answer to {', '.join(sorted(open_ids))}.", where)
        if message.role == "tool":
            if message.tool_call_id is None:
                raise invalid("A tool message needs `tool_call_id`.", f"{where}.tool_call_id")
            if message.tool_call_id not in open_ids:
                known = "it was answered already" if message.tool_call_id in seen_ids else "no earlier call has it"
                raise invalid(f"Unknown tool_call_id {message.tool_call_id!r}: {known}.", f"{where}.tool_call_id")
            open_ids.discard(message.tool_call_id)
        elif message.tool_calls is not None:
            if message.role != "assistant":
                raise invalid("Only assistant messages carry tool_calls.", f"{where}.tool_calls")
            open_ids = _check_calls(message.tool_calls, where, seen_ids)
        elif message.tool_call_id is not None:
            raise invalid("Only tool messages carry tool_call_id.", f"{where}.tool_call_id")
    if open_ids:
        raise invalid(f"The last assistant message's calls need tool messages answering them; no answer to "
                      f"{', '.join(sorted(open_ids))}.", f"messages[{len(messages) - 1}]")


def _check_calls(calls: list, where: str, seen_ids: set[str]) -> set[str]:
    ids: set[str] = set()
    for j, call in enumerate(calls):
        at = f"{where}.tool_calls[{j}]"
        if not call.id or call.id in ids or call.id in seen_ids:
            raise invalid(f"Each tool call needs an id of its own; {call.id!r} is {'empty' if not call.id else 'taken'}.",
                          f"{at}.id")
        if not call.function.name:
            raise invalid("A tool call needs its function's name.", f"{at}.function.name")
        try:
            arguments = json.loads(call.function.arguments)
        except ValueError as exc:
            raise invalid(f"The arguments of call {call.id!r} are not valid JSON: {exc}.",
                          f"{at}.function.arguments") from None
        if not isinstance(arguments, dict):
            raise invalid(f"The arguments of call {call.id!r} must be a JSON object.", f"{at}.function.arguments")
        ids.add(call.id)
    seen_ids |= ids
    return ids
