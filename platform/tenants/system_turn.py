"""The tenant's system turn comes first: the one place that rule is written.

A tenant's active system prompt is policy. Every prompt the platform sends for the tenant, from the
chat (chat.prompting) or the API (api.prompts), starts with it as its own system turn, so the prompt
begins with exactly the tokens pinned for the tenant (engine.encode_system_prefix, see tenants.pinning)
and those KV blocks are a prefix-cache hit. What follows it (the history, a client's own system
messages) adds to the tenant's instructions and cannot replace them.
"""
from typing import Any


def with_system_turn(system_prompt: str | None, turns: list[dict]) -> list[dict]:
    """[the tenant's system turn, *turns] as chat-template turns; just `turns` when no prompt is active."""
    head = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return head + list(turns)


def system_prefix_ids(engine: Any, system_prompt: str | None) -> list[int]:
    """The token ids the system turn renders to, for prompts sent as raw text or ids; [] without a prompt."""
    return engine.encode_system_prefix(system_prompt) if system_prompt else []
