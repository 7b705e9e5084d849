"""POST /tokenize and /detokenize (at the root, as vLLM serves them, and under /v1): the engine's
tokenizer for clients that count or inspect tokens.

/tokenize returns the token ids a completion of the same input would feed the engine: the tenant's
system prompt first (it is part of every prompt, and of the context the client must fit in), then
`prompt` as /v1/completions reads it, or `messages` (and `tools`) through the chat template as
/v1/chat/completions renders them. /detokenize turns ids back into text.
"""
from __future__ import annotations

import asyncio

from django.http import HttpResponse, JsonResponse

import engine_runtime
from api.calls import ApiCall
from api.errors import EXPECTED_ERRORS, ApiError, error_response, invalid, to_api_error
from api.profiles import resolve_profile
from api.prompts import chat_prompt_ids, completion_prompt_ids
from api.schemas import DetokenizeRequest, TokenizeRequest
from api.tools import tools_for_template
from pagoda.db import db_call
from tenants import selectors
from api.models import ApiKey
from tenants.models import Tenant


def _system_prompt(tenant: Tenant, model: str | None) -> str | None:
    if model is not None:
        resolve_profile(tenant, model)  # a 404 for a model the tenant does not have
    prompt = selectors.active_system_prompt(tenant)
    return prompt.text if prompt else None


def _vocab_size(tokenizer) -> int | None:
    try:
        return len(tokenizer)
    except TypeError:
        return None


async def _answer(call: ApiCall, work) -> HttpResponse:
    try:
        return JsonResponse(await work())
    except EXPECTED_ERRORS as exc:
        error = to_api_error(exc)
        call.fail(error)
        return error_response(error)
    finally:
        await call.finish()


async def tokenize(key: ApiKey, body: TokenizeRequest) -> HttpResponse:
    call = ApiCall(key, "tokenize", model=body.model or "")

    async def work() -> dict:
        if (body.prompt is None) == (body.messages is None):
            raise invalid("Send either `prompt` or `messages`.", "prompt")
        if body.tools is not None and body.messages is None:
            raise invalid("`tools` go with `messages`: a completion's prompt shows no tools.", "tools")
        system_prompt = await db_call(_system_prompt)(key.tenant, body.model)
        engine = await engine_runtime.aget_engine(timeout=0)
        if body.messages is not None:
            ids = await asyncio.to_thread(chat_prompt_ids, engine, system_prompt, body.messages,
                                          add_generation_prompt=body.add_generation_prompt,
                                          tools=tools_for_template(body))
        else:
            ids = await asyncio.to_thread(completion_prompt_ids, engine, system_prompt, body.prompt)
            vocab = _vocab_size(engine.tokenizer)  # token ids sent as the prompt are echoed, so checked here
            bad = next((i for i, t in enumerate(ids) if t < 0 or (vocab is not None and t >= vocab)), None)
            if bad is not None:
                raise ApiError(400, f"Token ids must be in [0, {vocab}).", param="prompt", code="invalid_value")
        strs = [engine.tokenizer.decode([t]) for t in ids] if body.return_token_strs else None
        return {"count": len(ids), "max_model_len": engine.max_model_len, "tokens": ids, "token_strs": strs}

    return await _answer(call, work)


async def detokenize(key: ApiKey, body: DetokenizeRequest) -> HttpResponse:
    call = ApiCall(key, "detokenize", model=body.model or "")

    async def work() -> dict:
        if body.model is not None:
            await db_call(resolve_profile)(key.tenant, body.model)
        engine = await engine_runtime.aget_engine(timeout=0)
        vocab = _vocab_size(engine.tokenizer)
        bad = next((i for i, t in enumerate(body.tokens) if t < 0 or (vocab is not None and t >= vocab)), None)
        if bad is not None:
            raise ApiError(400, f"Token ids must be in [0, {vocab}).", param=f"tokens[{bad}]", code="invalid_value")
        return {"prompt": await asyncio.to_thread(engine.tokenizer.decode, body.tokens)}

    return await _answer(call, work)
