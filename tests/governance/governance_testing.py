"""Helpers of the governance tests: a chat turn run through chat.services as the consumer runs it."""
from __future__ import annotations

import itertools
import uuid

from chat import services as chat_services
from chat.replies import ReplyStream
from inference.outputs import StreamDelta

_ids = itertools.count()


def chat_turn(user, conversation, *, prompt_tokens: int, output_tokens: int, cached_tokens: int = 0,
              content: str = "hello"):
    """Plan, begin and finish one turn (the engine's part replaced by one finished delta); returns the reply."""
    plan = chat_services.plan_turn(user, conversation.pk, content=content, profile_name=None)
    request_id = f"chat-test-{uuid.uuid4().hex[:12]}-{next(_ids)}"
    turn = chat_services.begin_turn(plan, request_id)
    stream = ReplyStream()
    stream.take(StreamDelta(request_id=request_id, text="hi", token_ids=[1] * output_tokens, finished=True,
                            finish_reason="length", num_prompt_tokens=prompt_tokens, num_cached_tokens=cached_tokens,
                            num_output_tokens=output_tokens))
    return chat_services.finish_turn(turn.reply, stream)
