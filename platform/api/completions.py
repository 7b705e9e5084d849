"""The flow of one completion call, shared by /v1/chat/completions and /v1/completions:

    rate limit (requests) -> profile + system prompt -> SamplingParams (one per choice) -> engine
    -> prompt tokens (characters checked first) -> context check -> rate limit (tokens)
    -> n engine requests -> JSON body or SSE stream -> usage row

Every error on the way is mapped once (api.errors.to_api_error); every call ends in ApiCall.finish().
"""
from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from django.http import HttpResponse, JsonResponse, StreamingHttpResponse

import engine_runtime
from api import openai_format as fmt
from api import ratelimit, scoring
from api.calls import ApiCall, new_request_id
from api.errors import EXPECTED_ERRORS, error_response, invalid, to_api_error
from api.generation import EngineRun, RunGroup
from api.models import ApiKey
from api.profiles import resolve_profile
from api.prompts import chat_prompt_ids, completion_prompt_ids, single_prompt
from api.sampling import build_params, fit_to_context
from api.schemas import ChatCompletionRequest, CompletionRequest, SamplingFields
from api.structured import structured_outputs_of
from governance import budgets
from inference import StreamDelta
from pagoda.db import db_call
from tenants import selectors
from tenants.models import SamplingProfile, Tenant

MAX_CHOICES = 128  # OpenAI's upper bound on n: each choice is one engine request
_PROMPT_LOGPROBS_STREAM = "not with stream (as vLLM): ask without stream, or use echo with logprobs"


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
    render: Callable[[RunGroup, ApiCall], dict]  # the JSON body of a non-streamed answer
    events: Callable[[RunGroup, ApiCall], AsyncIterator[str]]  # the SSE events of a streamed one
    num_choices: int = 1


def _sampling_overrides(body: SamplingFields, max_tokens: int | None) -> dict:
    fields = ("temperature", "top_p", "stop", "seed", "presence_penalty", "frequency_penalty", "top_k", "min_p",
              "repetition_penalty", "min_tokens", "ignore_eos", "logit_bias")
    return {name: getattr(body, name) for name in fields} | {
        "max_tokens": max_tokens, "structured_outputs": structured_outputs_of(body)}


def _vllm_extras(body: SamplingFields, prompt_logprobs: int | None) -> dict:
    """vLLM's extra SamplingParams fields a request may set (None keeps the profile's value)."""
    fields = ("stop_token_ids", "include_stop_str_in_output", "skip_special_tokens", "bad_words", "allowed_token_ids")
    return {name: getattr(body, name) for name in fields} | {"prompt_logprobs": prompt_logprobs}


def _num_choices(body: SamplingFields) -> int:
    n = 1 if body.n is None else body.n
    if not 1 <= n <= MAX_CHOICES:
        raise invalid(f"n must be in [1, {MAX_CHOICES}], got {n}.", "n", code="invalid_value")
    return n


def _refuse_unsupported(checks: dict[str, tuple[bool, str]]) -> None:
    """400 for each field set to something Pagoda does not implement (param -> (is it set?, why))."""
    for param, (is_set, why) in checks.items():
        if is_set:
            raise invalid(f"`{param}` is not supported by this server: {why}", param, code="unsupported_parameter")


def _check_model_name(model: str) -> None:
    """A control character (NUL above all, which PostgreSQL cannot store or compare) names no profile."""
    if any(ord(c) < 32 or ord(c) == 127 for c in model):
        raise invalid("`model` must not contain control characters.", "model", code="invalid_value")


def _profile_and_system_prompt(tenant: Tenant, model: str) -> tuple[SamplingProfile, str | None]:
    profile = resolve_profile(tenant, model)
    prompt = selectors.active_system_prompt(tenant)
    return profile, (prompt.text if prompt else None)


def _choice_params(params, num_choices: int) -> list:
    """One SamplingParams per choice: with a seed, choice i samples with seed + i (distinct and
    reproducible); without one, each draws from the engine's own generator. Only the first choice
    scores the prompt (prompt_logprobs): the prompt is the same for all."""
    if num_choices == 1:
        return [params]
    return [dataclasses.replace(params, seed=None if params.seed is None else params.seed + i,
                                prompt_logprobs=params.prompt_logprobs if i == 0 else None)
            for i in range(num_choices)]


async def _execute(call: ApiCall, plan_for: Callable[[], Plan], stream: bool) -> HttpResponse:
    plan: Plan | None = None
    try:
        _check_model_name(call.model)
        await ratelimit.check_request(call.key)
        plan = plan_for()
        call.profile, system_prompt = await db_call(_profile_and_system_prompt)(call.key.tenant, call.model)
        params = build_params(call.profile, plan.overrides, plan.logprobs)
        choice_params = _choice_params(params, plan.num_choices)  # a seed + i out of range is a 400 here
        engine = await engine_runtime.aget_engine(timeout=0)  # 503 while loading: never queue behind a load
        prompt_ids = await asyncio.to_thread(plan.encode, engine, system_prompt)
        choice_params = [fit_to_context(p, len(prompt_ids), engine.max_model_len,
                                        max_tokens_from_request=plan.max_tokens_from_request,
                                        prompt_param=plan.param_names["prompt"],
                                        max_tokens_param=plan.param_names.get("max_tokens", "max_tokens"))
                         for p in choice_params]
        await ratelimit.check_tokens(call.key, len(prompt_ids))
        # governance: reserve the call's most against the tenant's API budgets (QuotaExceeded: 429)
        await db_call(budgets.reserve_api)(
            call.key, call.request_id,
            len(prompt_ids) + sum(p.max_tokens or engine.max_model_len - len(prompt_ids) for p in choice_params))
        tenant = call.key.tenant.engine_key
        call.run = RunGroup([
            EngineRun(engine, call.request_id if plan.num_choices == 1 else f"{call.request_id}-{i}", prompt_ids,
                      p, tenant=tenant, profile=call.profile.name)
            for i, p in enumerate(choice_params)])
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
    except asyncio.CancelledError:  # the client went away; the engine requests are aborted below
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
    (cancellation, or the server closing the iterator) aborts the engine requests, and the usage
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


async def _choice_events(group: RunGroup, on_delta: Callable[[int, StreamDelta], str | None],
                         on_finish: Callable[[int, str | None], str]) -> AsyncIterator[str]:
    """Every choice's delta events as they come, then each choice's finish event once it is done."""
    finished: set[int] = set()
    async with aclosing(group.deltas()) as deltas:
        async for index, delta in deltas:
            event = on_delta(index, delta)
            if event:
                yield event
            if delta.finished:
                finished.add(index)
                yield on_finish(index, group.runs[index].finish_reason)
    for index, run in enumerate(group.runs):  # a stream that ended without its last delta
        if index not in finished:
            yield on_finish(index, run.finish_reason)


# --- /v1/chat/completions ---
def _chat_plan(call: ApiCall, body: ChatCompletionRequest, created: int) -> Plan:
    grammar = "it needs a grammar engine, which this server does not have yet"
    _refuse_unsupported({
        "tools": (bool(body.tools) or bool(body.functions), grammar),
        "tool_choice": (body.tool_choice not in (None, "none"), grammar),
        "prompt_logprobs": (body.prompt_logprobs is not None and body.stream, _PROMPT_LOGPROBS_STREAM),
    })
    prefix = scoring.PrefixLength()
    num_choices = _num_choices(body)
    if body.top_logprobs is not None and not body.logprobs:
        raise invalid("top_logprobs needs logprobs=true.", "top_logprobs")
    max_tokens = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
    logprobs = (body.top_logprobs or 0) if body.logprobs else None
    include_usage = bool(body.stream_options and body.stream_options.include_usage)

    def logprobs_of(run: EngineRun, token_ids: list[int], entries: list) -> dict | None:
        if logprobs is None:
            return None
        return fmt.chat_logprobs(run.engine.tokenizer, token_ids, entries, logprobs)

    def render(group: RunGroup, call: ApiCall) -> dict:
        choices = [fmt.chat_choice(i, run.text, run.finish_reason, logprobs_of(run, run.token_ids, run.logprobs))
                   for i, run in enumerate(group.runs)]
        answer = fmt.chat_completion(call.request_id, created, call.model, choices, group.usage())
        if body.prompt_logprobs is not None:  # vLLM puts it at the top level of a chat completion
            first = group.runs[0]
            _, entries = scoring.client_part(first.prompt_token_ids, first.prompt_logprobs or [], prefix.length)
            answer["prompt_logprobs"] = scoring.vllm_prompt_logprobs(first.engine.tokenizer, entries)
        return answer

    async def events(group: RunGroup, call: ApiCall) -> AsyncIterator[str]:
        def chunk(index: int, delta: dict, **kw) -> str:
            return fmt.sse(fmt.chat_chunk(call.request_id, created, call.model, delta, index=index,
                                          with_usage=include_usage, **kw))

        def on_delta(index: int, delta: StreamDelta) -> str | None:
            run = group.runs[index]
            lp = logprobs_of(run, delta.token_ids, delta.logprobs or []) if delta.logprobs else None
            return chunk(index, {"content": delta.text}, logprobs=lp) if delta.text or lp else None

        for index in range(len(group.runs)):
            yield chunk(index, {"role": "assistant", "content": ""})
        async for event in _choice_events(group, on_delta, lambda i, reason: chunk(i, {}, finish_reason=reason)):
            yield event
        if include_usage:
            yield fmt.sse(fmt.chat_usage_chunk(call.request_id, created, call.model, group.usage()))
        yield fmt.SSE_DONE

    return Plan(
        overrides=_sampling_overrides(body, max_tokens) | _vllm_extras(body, body.prompt_logprobs),
        logprobs=logprobs,
        encode=prefix.measuring(lambda engine, system_prompt: chat_prompt_ids(engine, system_prompt, body.messages)),
        param_names={"prompt": "messages", "logprobs": "top_logprobs",
                     "max_tokens": "max_completion_tokens" if body.max_completion_tokens is not None else "max_tokens"},
        max_tokens_from_request=max_tokens is not None,
        render=render,
        events=events,
        num_choices=num_choices,
    )


async def chat_completion(key: ApiKey, body: ChatCompletionRequest) -> HttpResponse:
    call = ApiCall(key, "chat.completions", model=body.model, stream=body.stream,
                   request_id=new_request_id("chatcmpl"))
    return await _execute(call, lambda: _chat_plan(call, body, int(time.time())), body.stream)


# --- /v1/completions ---


def _echo_text(engine: Any, prompt: str | list[int]) -> str:
    """The prompt as echo puts it before each choice's text: the client's own text (or its token ids
    decoded), without the tenant's system prompt."""
    return prompt if isinstance(prompt, str) else engine.tokenizer.decode(prompt)


def _completion_plan(call: ApiCall, body: CompletionRequest, created: int) -> Plan:
    _refuse_unsupported({
        "best_of": (body.best_of not in (None, 1),
                    "ask for n choices and rank them yourself (vLLM's V1 engine dropped best_of too)"),
        "suffix": (bool(body.suffix), "the engine only appends to a prompt (no fill-in-the-middle)"),
        "prompt_logprobs": (body.prompt_logprobs is not None and body.stream, _PROMPT_LOGPROBS_STREAM),
    })
    num_choices = _num_choices(body)
    prompt = single_prompt(body.prompt)
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    # OpenAI's scoring call: echo with logprobs scores the prompt; with max_tokens 0 it generates nothing
    # (the engine samples one token, which is not shown, as vLLM does).
    echo_only = bool(body.echo) and body.max_tokens == 0
    echo_scored = bool(body.echo) and body.logprobs is not None
    wanted = [k for k in (body.prompt_logprobs, body.logprobs if echo_scored else None) if k is not None]
    prefix = scoring.PrefixLength()

    def logprobs_of(run: EngineRun, token_ids: list[int], entries: list, offset: int) -> dict | None:
        if body.logprobs is None:
            return None
        return fmt.completion_logprobs(run.engine.tokenizer, token_ids, entries, body.logprobs, offset)

    def echo(run: EngineRun) -> str:
        return _echo_text(run.engine, prompt) if body.echo else ""

    def scored_prompt(group: RunGroup) -> tuple[list[int], list]:
        first = group.runs[0]
        return scoring.client_part(first.prompt_token_ids, first.prompt_logprobs or [], prefix.length)

    def choice_logprobs(group: RunGroup, run: EngineRun) -> dict | None:
        token_ids, entries = ([], []) if echo_only else (run.token_ids, run.logprobs)
        if echo_scored:  # the prompt's tokens, then the generated ones, as one set of lists
            prompt_ids, prompt_entries = scored_prompt(group)
            return logprobs_of(run, prompt_ids + token_ids, prompt_entries + entries, 0)
        return logprobs_of(run, token_ids, entries, len(echo(run)))

    def render(group: RunGroup, call: ApiCall) -> dict:
        choices = [fmt.completion_choice(i, echo(run) + ("" if echo_only else run.text), run.finish_reason,
                                         choice_logprobs(group, run))
                   for i, run in enumerate(group.runs)]
        if body.prompt_logprobs is not None:  # vLLM's extra, in every choice
            shown = scoring.vllm_prompt_logprobs(group.runs[0].engine.tokenizer, scored_prompt(group)[1])
            for choice in choices:
                choice["prompt_logprobs"] = shown
        return fmt.completion(call.request_id, created, call.model, choices, group.usage())

    async def events(group: RunGroup, call: ApiCall) -> AsyncIterator[str]:
        # Every choice's first delta is in before the stream starts (RunGroup.start): the prompt's
        # scores are known when its echo is sent.
        offsets = [len(echo(run)) for run in group.runs]

        def chunk(index: int, text: str, finish_reason: str | None = None, logprobs: dict | None = None) -> str:
            choice = fmt.completion_choice(index, text, finish_reason, logprobs)
            return fmt.sse(fmt.completion(call.request_id, created, call.model, [choice], None))

        def on_delta(index: int, delta: StreamDelta) -> str | None:
            if echo_only:
                return None
            run = group.runs[index]
            lp = logprobs_of(run, delta.token_ids, delta.logprobs or [], offsets[index]) if delta.logprobs else None
            offsets[index] += len(delta.text)
            return chunk(index, delta.text, logprobs=lp) if delta.text or lp else None

        if body.echo:
            for index, run in enumerate(group.runs):
                lp = logprobs_of(run, *scored_prompt(group), 0) if echo_scored else None
                yield chunk(index, echo(run), logprobs=lp)
        async for event in _choice_events(group, on_delta, lambda i, reason: chunk(i, "", reason)):
            yield event
        if include_usage:
            yield fmt.sse(fmt.completion_usage_chunk(call.request_id, created, call.model, group.usage()))
        yield fmt.SSE_DONE

    return Plan(
        overrides=_sampling_overrides(body, 1 if echo_only else body.max_tokens)
        | _vllm_extras(body, max(wanted) if wanted else None),
        logprobs=body.logprobs,
        encode=prefix.measuring(lambda engine, system_prompt: completion_prompt_ids(engine, system_prompt, prompt)),
        param_names={"prompt": "prompt"},
        max_tokens_from_request=body.max_tokens is not None,
        render=render,
        events=events,
        num_choices=num_choices,
    )


async def text_completion(key: ApiKey, body: CompletionRequest) -> HttpResponse:
    call = ApiCall(key, "completions", model=body.model, stream=body.stream, request_id=new_request_id("cmpl"))
    return await _execute(call, lambda: _completion_plan(call, body, int(time.time())), body.stream)
