"""The flow of one completion call, shared by /v1/chat/completions and /v1/completions:

    rate limit (requests) -> profile + system prompt -> SamplingParams -> engine -> prompt tokens
    -> context check -> rate limit (tokens) -> engine request -> JSON body or SSE stream -> usage row

Every error on the way is mapped once (api.errors.to_api_error); every call ends in ApiCall.finish().
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from django.http import HttpResponse, JsonResponse, StreamingHttpResponse

import engine_runtime
from api import openai_format as fmt
from api import ratelimit
from api.calls import ApiCall, new_request_id
from api.errors import EXPECTED_ERRORS, error_response, invalid, to_api_error
from api.generation import EngineRun
from api.models import ApiKey
from api.profiles import resolve_profile
from api.prompts import chat_prompt_ids, completion_prompt_ids
from api.sampling import build_params, fit_to_context
from api.schemas import ChatCompletionRequest, CompletionRequest, SamplingFields
from pagoda.db import db_call
from tenants import selectors
from tenants.models import SamplingProfile, Tenant

class EventStreamResponse(StreamingHttpResponse):
    """A `text/event-stream` response whose event generator is closed as soon as the server stops
    reading it (the client disconnected), not whenever it is garbage-collected: Django's ASGI handler
    closes the iterator it reads (aiter(response)), and this one passes that on to the events."""

    def __init__(self, events: AsyncIterator[str]):
        super().__init__(events, content_type="text/event-stream")
        self._events = events
        self["Cache-Control"] = "no-cache"
        self["X-Accel-Buffering"] = "no"  # a proxy must not buffer the stream

    async def __aiter__(self):
        async with aclosing(self._events):
            async for part in self._events:
                yield self.make_bytes(part)


@dataclass
class Plan:
    """What differs between the two endpoints; the flow in `_execute` is the same."""

    overrides: dict  # SamplingParams fields from the request (None: the profile's value)
    logprobs: int | None  # alternatives per token, or None for no logprobs
    encode: Callable[[Any, str | None], list[int]]  # (engine, system prompt) -> prompt token ids
    param_names: dict[str, str]  # engine field -> the request's name for it (for error params)
    max_tokens_from_request: bool
    render: Callable[[EngineRun, ApiCall], dict]  # the JSON body of a non-streamed answer
    events: Callable[[EngineRun, ApiCall], AsyncIterator[str]]  # the SSE events of a streamed one


def _sampling_overrides(body: SamplingFields, max_tokens: int | None) -> dict:
    fields = ("temperature", "top_p", "stop", "seed", "presence_penalty", "frequency_penalty", "top_k", "min_p",
              "repetition_penalty", "min_tokens", "ignore_eos")
    return {name: getattr(body, name) for name in fields} | {"max_tokens": max_tokens}


def _refuse_unsupported(body: SamplingFields, checks: dict[str, bool]) -> None:
    """400 for each field set to something Pagoda does not implement (checks: param -> is it set?)."""
    checks = {"n": body.n not in (None, 1), "logit_bias": bool(body.logit_bias), **checks}
    for param, is_set in checks.items():
        if is_set:
            hint = " Only n=1 is supported; send several requests." if param == "n" else ""
            raise invalid(f"`{param}` is not supported by this server.{hint}", param, code="unsupported_parameter")


def _profile_and_system_prompt(tenant: Tenant, model: str) -> tuple[SamplingProfile, str | None]:
    profile = resolve_profile(tenant, model)
    prompt = selectors.active_system_prompt(tenant)
    return profile, (prompt.text if prompt else None)


async def _execute(call: ApiCall, plan_for: Callable[[], Plan], stream: bool) -> HttpResponse:
    plan: Plan | None = None
    try:
        await ratelimit.check_request(call.key)
        plan = plan_for()
        call.profile, system_prompt = await db_call(_profile_and_system_prompt)(call.key.tenant, call.model)
        params = build_params(call.profile, plan.overrides, plan.logprobs)
        engine = await engine_runtime.aget_engine(timeout=0)  # 503 while loading: never queue behind a load
        prompt_ids = await asyncio.to_thread(plan.encode, engine, system_prompt)
        params = fit_to_context(params, len(prompt_ids), engine.max_model_len,
                                max_tokens_from_request=plan.max_tokens_from_request,
                                prompt_param=plan.param_names["prompt"],
                                max_tokens_param=plan.param_names.get("max_tokens", "max_tokens"))
        await ratelimit.check_tokens(call.key, len(prompt_ids))
        call.run = EngineRun(engine, call.request_id, prompt_ids, params, tenant=call.key.tenant.engine_key,
                             profile=call.profile.name)
        await call.run.start()
        if stream:
            call.handed_off = True
            return EventStreamResponse(_guarded(plan.events(call.run, call), call))
        await call.run.collect()
        return JsonResponse(plan.render(call.run, call))
    except EXPECTED_ERRORS as exc:
        error = to_api_error(exc, plan.param_names if plan else None)
        call.fail(error)
        return error_response(error)
    except asyncio.CancelledError:  # the client went away; the engine request is aborted below
        call.disconnected()
        raise
    except Exception:
        call.status_code, call.error_code = 500, "internal_error"
        raise
    finally:
        if not call.handed_off:
            if call.run is not None:
                await call.run.aclose()
            await call.finish()


async def _guarded(events: AsyncIterator[str], call: ApiCall) -> AsyncIterator[str]:
    """The stream around an endpoint's events: a failure becomes an error event, a disconnect
    (cancellation, or the server closing the iterator) aborts the engine request, and the usage
    row is written at the end either way."""
    completed = False
    try:
        async with aclosing(events):
            async for event in events:
                yield event
        completed = True
    except EXPECTED_ERRORS as exc:
        error = to_api_error(exc)
        call.fail(error)
        completed = True
        yield fmt.stream_error(error.body())
    except Exception:
        call.status_code, call.error_code, completed = 500, "internal_error", True
        raise
    finally:
        if not completed:
            call.disconnected()
        await call.run.aclose()
        await call.finish()


# --- /v1/chat/completions ---
def _chat_plan(call: ApiCall, body: ChatCompletionRequest, created: int) -> Plan:
    _refuse_unsupported(body, {
        "tools": bool(body.tools) or bool(body.functions),
        "tool_choice": body.tool_choice not in (None, "none"),
        "response_format": body.response_format is not None and body.response_format.get("type") != "text",
    })
    if body.top_logprobs is not None and not body.logprobs:
        raise invalid("top_logprobs needs logprobs=true.", "top_logprobs")
    max_tokens = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
    logprobs = (body.top_logprobs or 0) if body.logprobs else None
    include_usage = bool(body.stream_options and body.stream_options.include_usage)

    def logprobs_of(run: EngineRun, token_ids: list[int], entries: list) -> dict | None:
        if logprobs is None:
            return None
        return fmt.chat_logprobs(run.engine.tokenizer, token_ids, entries, logprobs)

    def render(run: EngineRun, call: ApiCall) -> dict:
        return fmt.chat_completion(call.request_id, created, call.model, run.text, run.finish_reason, run.usage(),
                                   logprobs_of(run, run.token_ids, run.logprobs))

    async def events(run: EngineRun, call: ApiCall) -> AsyncIterator[str]:
        def chunk(delta: dict, **kw) -> str:
            return fmt.sse(fmt.chat_chunk(call.request_id, created, call.model, delta, with_usage=include_usage, **kw))

        yield chunk({"role": "assistant", "content": ""})
        async for delta in run:
            lp = logprobs_of(run, delta.token_ids, delta.logprobs or []) if delta.logprobs else None
            if delta.text or lp:
                yield chunk({"content": delta.text}, logprobs=lp)
        yield chunk({}, finish_reason=run.finish_reason)
        if include_usage:
            yield fmt.sse(fmt.chat_usage_chunk(call.request_id, created, call.model, run.usage()))
        yield fmt.SSE_DONE

    return Plan(
        overrides=_sampling_overrides(body, max_tokens),
        logprobs=logprobs,
        encode=lambda engine, system_prompt: chat_prompt_ids(engine, system_prompt, body.messages),
        param_names={"prompt": "messages", "logprobs": "top_logprobs",
                     "max_tokens": "max_completion_tokens" if body.max_completion_tokens is not None else "max_tokens"},
        max_tokens_from_request=max_tokens is not None,
        render=render,
        events=events,
    )


async def chat_completion(key: ApiKey, body: ChatCompletionRequest) -> HttpResponse:
    call = ApiCall(key, "chat.completions", model=body.model, stream=body.stream,
                   request_id=new_request_id("chatcmpl"))
    return await _execute(call, lambda: _chat_plan(call, body, int(time.time())), body.stream)


# --- /v1/completions ---
def _completion_plan(call: ApiCall, body: CompletionRequest, created: int) -> Plan:
    _refuse_unsupported(body, {"echo": bool(body.echo), "best_of": body.best_of not in (None, 1),
                               "suffix": bool(body.suffix)})
    include_usage = bool(body.stream_options and body.stream_options.include_usage)

    def logprobs_of(run: EngineRun, token_ids: list[int], entries: list, offset: int) -> dict | None:
        if body.logprobs is None:
            return None
        return fmt.completion_logprobs(run.engine.tokenizer, token_ids, entries, body.logprobs, offset)

    def render(run: EngineRun, call: ApiCall) -> dict:
        return fmt.completion(call.request_id, created, call.model, run.text, run.finish_reason, run.usage(),
                              logprobs_of(run, run.token_ids, run.logprobs, 0))

    async def events(run: EngineRun, call: ApiCall) -> AsyncIterator[str]:
        offset = 0
        async for delta in run:
            lp = logprobs_of(run, delta.token_ids, delta.logprobs or [], offset) if delta.logprobs else None
            offset += len(delta.text)
            if delta.text or lp:
                yield fmt.sse(fmt.completion(call.request_id, created, call.model, delta.text, None, None, lp))
        yield fmt.sse(fmt.completion(call.request_id, created, call.model, "", run.finish_reason, None))
        if include_usage:
            yield fmt.sse(fmt.completion_usage_chunk(call.request_id, created, call.model, run.usage()))
        yield fmt.SSE_DONE

    return Plan(
        overrides=_sampling_overrides(body, body.max_tokens),
        logprobs=body.logprobs,
        encode=lambda engine, system_prompt: completion_prompt_ids(engine, system_prompt, body.prompt),
        param_names={"prompt": "prompt"},
        max_tokens_from_request=body.max_tokens is not None,
        render=render,
        events=events,
    )


async def text_completion(key: ApiKey, body: CompletionRequest) -> HttpResponse:
    call = ApiCall(key, "completions", model=body.model, stream=body.stream, request_id=new_request_id("cmpl"))
    return await _execute(call, lambda: _completion_plan(call, body, int(time.time())), body.stream)
