"""Token ids of a request's prompt, with the tenant's system prompt in front.

The tenant's active system prompt always comes first (tenants.system_turn). A client's own system (or
developer) messages are kept, in place, after it: they add to the tenant's instructions and cannot
replace them.

/v1/completions takes raw text, without a chat template; there the tenant's system turn is put in
front as tokens, and the client's text follows it.

Cheap limits come first: no token is longer than the vocabulary's longest entry, so a prompt with
more characters than max_model_len times that length cannot fit, and is refused before the
(expensive) tokenizer ever sees it.
"""
from __future__ import annotations

import json
from typing import Any

from jinja2.exceptions import TemplateError

from api.errors import context_too_long, invalid
from api.schemas import ChatMessage
from tenants.system_turn import system_prefix_ids, with_system_turn

_longest_token_chars: dict[int, int] = {}  # id(tokenizer) -> characters of its longest vocabulary entry


def longest_token_chars(tokenizer: Any) -> int:
    """An upper bound on the characters one token decodes to: its longest vocabulary entry (a
    byte-level entry has one character per byte, never fewer than the text it stands for)."""
    key = id(tokenizer)
    if key not in _longest_token_chars:
        vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
        _longest_token_chars[key] = max((len(token) for token in vocab), default=0) or 64
    return _longest_token_chars[key]


def check_prompt_chars(engine: Any, num_chars: int, param: str) -> None:
    """400 context_length_exceeded for a prompt too long to fit whatever it tokenizes to."""
    longest = longest_token_chars(engine.tokenizer)
    if num_chars > engine.max_model_len * longest:
        raise context_too_long(
            f"This model's maximum context length is {engine.max_model_len} tokens. However, your prompt has "
            f"{num_chars} characters, more than that many tokens can hold (at most {longest} characters each).",
            param)


def _text(message: ChatMessage, index: int) -> str | None:
    content = message.content
    if content is None:
        if message.role == "assistant" and message.tool_calls:
            return None  # an answer that was only calls
        raise invalid("Each message needs `content` (null only in an assistant message with tool_calls).",
                      f"messages[{index}].content")
    if isinstance(content, str):
        return content
    texts = []
    for part_index, part in enumerate(content):
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise invalid("Only text content parts are supported.", f"messages[{index}].content[{part_index}]")
        texts.append(part["text"])
    return "".join(texts)


def chat_messages(system_prompt: str | None, messages: list[ChatMessage]) -> list[dict]:
    """The conversation the chat template renders: the tenant's system turn, then the client's (with
    an assistant's tool_calls and a tool message's tool_call_id)."""
    turns = []
    for index, message in enumerate(messages):
        role = "system" if message.role == "developer" else message.role
        turn: dict = {"role": role, "content": _text(message, index)}
        if message.tool_calls:
            turn["tool_calls"] = [call.model_dump() for call in message.tool_calls]
        if message.tool_call_id is not None:
            turn["tool_call_id"] = message.tool_call_id
        turns.append(turn)
    return with_system_turn(system_prompt, turns)


def _num_chars(turns: list[dict], tools: list[dict] | None) -> int:
    calls = sum(len(call["function"]["arguments"]) for turn in turns for call in turn.get("tool_calls", ()))
    return sum(len(turn["content"] or "") for turn in turns) + calls + len(json.dumps(tools) if tools else "")


def chat_prompt_ids(engine: Any, system_prompt: str | None, messages: list[ChatMessage], *,
                    add_generation_prompt: bool = True, tools: list[dict] | None = None) -> list[int]:
    """Render and tokenize (CPU work: call it off the event loop). `tools` (OpenAI tool objects) go
    through the chat template (inference.tool_prompt). Raises a 400 if the model's chat template
    refuses the conversation (e.g. roles out of the order it accepts)."""
    turns = chat_messages(system_prompt, messages)
    check_prompt_chars(engine, _num_chars(turns, tools), "messages")
    has_tools = tools or any("tool_calls" in turn or turn["role"] == "tool" for turn in turns)
    extra = {"tools": tools} if has_tools else {}
    try:
        return engine.encode_chat(turns, add_generation_prompt=add_generation_prompt, **extra)
    except TemplateError as exc:
        raise invalid(f"The model's chat template cannot render these messages: {exc}", "messages") from exc


def single_prompt(prompt: str | list) -> str | list[int]:
    """The one prompt of a completion request: text, or token ids; a batch of several is refused."""
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        if len(prompt) != 1:
            raise invalid("Only one prompt per request is supported; send one request per prompt.", "prompt")
        return prompt[0]
    return prompt


def completion_prompt_ids(engine: Any, system_prompt: str | None, prompt: str | list) -> list[int]:
    """Raw text (or token ids) after the tenant's system turn; a batch of several prompts is refused."""
    prompt = single_prompt(prompt)
    prefix = system_prefix_ids(engine, system_prompt)
    if isinstance(prompt, list):  # token ids (the engine checks they are in the vocabulary)
        return prefix + list(prompt)
    if not prompt:
        raise invalid("The prompt is empty.", "prompt")
    check_prompt_chars(engine, len(prompt), "prompt")
    # With a system turn in front, the text continues it (no second BOS); alone it is tokenized as usual.
    return prefix + engine.tokenizer.encode(prompt, add_special_tokens=not prefix)
