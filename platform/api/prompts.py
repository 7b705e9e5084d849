"""Token ids of a request's prompt, with the tenant's system prompt in front.

The tenant's active system prompt always comes first (tenants.system_turn). A client's own system (or
developer) messages are kept, in place, after it: they add to the tenant's instructions and cannot
replace them.

/v1/completions takes raw text, without a chat template; there the tenant's system turn is put in
front as tokens, and the client's text follows it.
"""
from __future__ import annotations

from typing import Any

from jinja2.exceptions import TemplateError

from api.errors import invalid
from api.schemas import ChatMessage
from tenants.system_turn import system_prefix_ids, with_system_turn


def _text(message: ChatMessage, index: int) -> str:
    content = message.content
    if content is None:
        raise invalid("Each message needs `content` (tool calls are not supported).", f"messages[{index}].content")
    if isinstance(content, str):
        return content
    texts = []
    for part_index, part in enumerate(content):
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise invalid("Only text content parts are supported.", f"messages[{index}].content[{part_index}]")
        texts.append(part["text"])
    return "".join(texts)


def chat_messages(system_prompt: str | None, messages: list[ChatMessage]) -> list[dict[str, str]]:
    """The conversation the chat template renders: the tenant's system turn, then the client's."""
    turns = []
    for index, message in enumerate(messages):
        role = "system" if message.role == "developer" else message.role
        turns.append({"role": role, "content": _text(message, index)})
    return with_system_turn(system_prompt, turns)


def chat_prompt_ids(engine: Any, system_prompt: str | None, messages: list[ChatMessage]) -> list[int]:
    """Render and tokenize (CPU work: call it off the event loop). Raises a 400 if the model's chat
    template refuses the conversation (e.g. roles out of the order it accepts)."""
    turns = chat_messages(system_prompt, messages)
    try:
        return engine.encode_chat(turns)
    except TemplateError as exc:
        raise invalid(f"The model's chat template cannot render these messages: {exc}", "messages") from exc


def completion_prompt_ids(engine: Any, system_prompt: str | None, prompt: str | list) -> list[int]:
    """Raw text (or token ids) after the tenant's system turn; a batch of several prompts is refused."""
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        if len(prompt) != 1:
            raise invalid("Only one prompt per request is supported; send one request per prompt.", "prompt")
        prompt = prompt[0]
    prefix = system_prefix_ids(engine, system_prompt)
    if isinstance(prompt, list):  # token ids (the engine checks they are in the vocabulary)
        return prefix + list(prompt)
    if not prompt:
        raise invalid("The prompt is empty.", "prompt")
    # With a system turn in front, the text continues it (no second BOS); alone it is tokenized as usual.
    return prefix + engine.tokenizer.encode(prompt, add_special_tokens=not prefix)
