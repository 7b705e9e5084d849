"""Turning a conversation into the engine's prompt: [system, *history, user] through the chat template.

The tenant's system prompt always comes first (tenants.system_turn), so every chat request of the
tenant starts with the pinned KV blocks.
When the history is too long for the context, the oldest turns are left out (the prompt then starts at
an older user turn); only a system prompt plus the new message that alone do not fit is an error.
"""
from __future__ import annotations

from collections.abc import Callable

from inference.errors import PromptTooLongError
from tenants.system_turn import with_system_turn

EncodeChat = Callable[[list[dict]], list[int]]


def build_prompt_ids(encode_chat: EncodeChat, system_prompt: str | None, turns: list[dict], *,
                     max_model_len: int, num_reserved: int) -> tuple[list[int], int]:
    """Token ids for [system?, *turns[start:]] and `start`, the number of turns left out.

    turns: {"role", "content"} dicts, oldest first, ending with the user turn to answer.
    num_reserved: tokens to keep free for the reply; older turns are dropped until they fit (never the
    last user turn). Raises PromptTooLongError when the system prompt and the last turn alone leave
    no room for a single generated token (the engine's own rule).
    """
    if not turns or turns[-1]["role"] != "user":
        raise ValueError("the turns must end with a user turn")
    starts = [i for i, turn in enumerate(turns) if turn["role"] == "user"]
    encoded: dict[int, list[int]] = {}

    def ids_from(k: int) -> list[int]:  # the prompt starting at the k-th user turn
        if k not in encoded:
            encoded[k] = encode_chat(with_system_turn(system_prompt, turns[starts[k]:]))
        return encoded[k]

    def fits(k: int) -> bool:
        return len(ids_from(k)) + num_reserved <= max_model_len

    if fits(0):
        return ids_from(0), 0
    last = len(starts) - 1
    if not fits(last):  # only the newest turn is left: send it if any token fits after it
        ids = ids_from(last)
        if len(ids) >= max_model_len:
            raise PromptTooLongError(
                f"the prompt has {len(ids):,} tokens and the context holds {max_model_len:,}; "
                "shorten the message", field="prompt")
        return ids, starts[last]
    low, high = 1, last  # fits(high) holds; find the earliest start that fits (fewer turns never grow)
    while low < high:
        mid = (low + high) // 2
        if fits(mid):
            high = mid
        else:
            low = mid + 1
    return ids_from(low), starts[low]
