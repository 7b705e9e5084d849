"""A request's SamplingParams: the profile's values, overridden by the fields the client sent."""
from __future__ import annotations

import dataclasses

from api.errors import context_too_long, invalid
from inference import SamplingParams
from tenants.models import SamplingProfile


def build_params(profile: SamplingProfile, overrides: dict, logprobs: int | None) -> SamplingParams:
    """The profile's SamplingParams with every non-None override applied; always n=1.

    Log-probabilities are computed only when the request asks for them (`logprobs`), whatever the
    profile says: they cost time and change the response's shape.
    The engine validates the result: a bad value raises InvalidRequestError naming the field (a 400).
    """
    kwargs = profile.sampling_kwargs()
    kwargs.update({name: value for name, value in overrides.items() if value is not None})
    kwargs["n"] = 1
    kwargs["logprobs"] = logprobs
    return SamplingParams(**kwargs)


def fit_to_context(params: SamplingParams, num_prompt_tokens: int, max_model_len: int, *,
                   max_tokens_from_request: bool, prompt_param: str, max_tokens_param: str) -> SamplingParams:
    """Check the prompt against the context; fit max_tokens into what is left.

    A prompt that leaves no room, or a max_tokens the client asked for that does not fit, is a 400
    context_length_exceeded (as OpenAI and vLLM answer). The profile's own max_tokens is a default,
    so it is shortened to the room left instead.
    """
    room = max_model_len - num_prompt_tokens
    if room < 1:
        raise context_too_long(
            f"This model's maximum context length is {max_model_len} tokens. However, your prompt has "
            f"{num_prompt_tokens} tokens, leaving no room for the completion.", prompt_param)
    if params.max_tokens is None or params.max_tokens <= room:
        return params
    if max_tokens_from_request:
        raise context_too_long(
            f"This model's maximum context length is {max_model_len} tokens. However, you requested "
            f"{num_prompt_tokens + params.max_tokens} tokens ({num_prompt_tokens} in the prompt, "
            f"{params.max_tokens} for the completion).", max_tokens_param)
    if params.min_tokens > room:
        raise invalid(f"min_tokens ({params.min_tokens}) does not fit in the {room} tokens left in the context.",
                      "min_tokens")
    return dataclasses.replace(params, max_tokens=room)
