"""Tool calling and structured answers with the real clients against the live server (the real engine on a
tiny random model, see api_live_server.py): the official `openai` client, LangChain's ChatOpenAI and
LiteLLM, as a company tool would call them.

A random model picks no tool by itself, so the calls here are forced (a named function, or "required"),
which the grammar engine holds to the function's schema. The schemas use enums and booleans, so every
answer is a few tokens long whatever the model's weights; calls are compact JSON.

JSON modes (response_format json_object / json_schema) allow whitespace anywhere, as OpenAI's and vLLM's
do, and a random model fills it with whitespace until max_tokens: those answers come from a second
server on the real SmolLM2-135M-Instruct (`smol_live`), which writes JSON as it was trained to.
"""
import json
import os
from typing import Literal

import openai
import pytest
from pydantic import BaseModel

import api_live_server as live_server  # a sibling module: the tests folders are not packages

CITIES = ["Paris", "Oslo", "Seoul"]
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": CITIES},
                                                    "metric": {"type": "boolean"}},
                   "required": ["city", "metric"]}}}
TIME_TOOL = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["CET", "KST"]}},
                                       "required": ["zone"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


class Weather(BaseModel):
    """The weather in a city."""

    city: Literal["Paris", "Oslo", "Seoul"]
    metric: bool


@pytest.fixture
def client(live):
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key=live.key("acme"), max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def smol_live(tmp_path_factory, smol_path):
    """A live server on the embedded SmolLM2-135M-Instruct (see the module docstring)."""
    from django.conf import settings

    from console import panels

    with live_server.serve(tmp_path_factory.mktemp("smol-live"), str(smol_path), settings.DATABASES["default"],
                           settings.SECRET_KEY, {panels.STATS_TOKEN_HEADER: panels.stats_token()}) as server:
        yield server


@pytest.fixture
def smol_client(smol_live):
    return openai.OpenAI(base_url=f"{smol_live.url}/v1", api_key=smol_live.key("acme"), max_retries=0, timeout=120)


def _check_weather_arguments(arguments: str) -> dict:
    args = json.loads(arguments)
    assert args["city"] in CITIES and isinstance(args["metric"], bool), args
    return args


# --- the official openai client ---
def test_plain_streamed_and_n_choices(client):
    plain = client.chat.completions.create(model="terse", messages=ASK, max_tokens=4)
    assert plain.choices[0].message.tool_calls is None and plain.choices[0].finish_reason in ("stop", "length")
    stream = client.chat.completions.create(model="terse", messages=ASK, max_tokens=4, stream=True)
    chunks = list(stream)
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    several = client.chat.completions.create(model="terse", messages=ASK, max_tokens=4, n=3, seed=1)
    assert [c.index for c in several.choices] == [0, 1, 2]


def test_tools_offered_with_auto_choice_are_shown_and_answered(client):
    without = client.chat.completions.create(model="terse", messages=ASK, max_tokens=2)
    offered = client.chat.completions.create(model="terse", messages=ASK, max_tokens=2, tools=[WEATHER_TOOL])
    assert offered.usage.prompt_tokens > without.usage.prompt_tokens + 50  # the tools are in the prompt
    assert offered.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_named_tool_choice(client):
    answer = client.chat.completions.create(model="terse", messages=ASK, max_tokens=40, tools=[WEATHER_TOOL, TIME_TOOL],
                                            tool_choice=NAMED)
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather" and call.id.startswith("call_")
    _check_weather_arguments(call.function.arguments)


def test_named_tool_choice_streamed(client):
    stream = client.chat.completions.create(model="terse", messages=ASK, max_tokens=40, tools=[WEATHER_TOOL],
                                            tool_choice=NAMED, stream=True)
    deltas, finish = [], None
    for chunk in stream:
        for choice in chunk.choices:
            deltas += choice.delta.tool_calls or []
            finish = choice.finish_reason or finish
    first, rest = deltas[0], deltas[1:]
    assert (first.index, first.type, first.function.name, first.function.arguments) == (0, "function", "get_weather", "")
    assert first.id and all(d.id is None and d.function.name is None and d.index == 0 for d in rest)
    _check_weather_arguments("".join(d.function.arguments for d in rest))
    assert finish == "tool_calls"


def test_required_tool_choice_and_the_conversation_that_follows(client):
    answer = client.chat.completions.create(model="terse", messages=ASK, max_tokens=60, tools=[WEATHER_TOOL, TIME_TOOL],
                                            tool_choice="required", parallel_tool_calls=False)
    [call] = answer.choices[0].message.tool_calls
    assert call.function.name in ("get_weather", "get_time")
    json.loads(call.function.arguments)
    # the call and its result go back as history; the model answers in text
    history = ASK + [answer.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}]
    follow_up = client.chat.completions.create(model="terse", messages=history, max_tokens=4, tools=[WEATHER_TOOL, TIME_TOOL],
                                               tool_choice="none")
    assert follow_up.choices[0].message.tool_calls is None
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="terse", messages=history[:-1] + [{**history[-1], "tool_call_id": "nope"}],
                                       max_tokens=4)
    assert refused.value.param == "messages[2].tool_call_id"


def test_a_function_schema_the_grammar_engine_refuses_is_a_400(live, client):
    bad = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "x": {"type": "string", "pattern": "(unclosed"}}}}}
    computed = live.engine_stats()["stats"]["prompt_tokens_total"]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="terse", messages=ASK, max_tokens=4, tools=[bad], tool_choice="required")
    assert "parenthesis" in refused.value.message and refused.value.param == "tools"
    assert live.engine_stats()["stats"]["prompt_tokens_total"] == computed  # refused before the engine ran it


def test_json_schema_response_format(smol_client):
    answer = smol_client.chat.completions.create(
        model="terse", messages=ASK, max_tokens=60,
        response_format={"type": "json_schema", "json_schema": {"name": "weather", "schema": Weather.model_json_schema(),
                                                                "strict": True}})
    Weather.model_validate_json(answer.choices[0].message.content)


# --- LangChain ---
def _chat_model(server):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="terse", base_url=f"{server.url}/v1", api_key=server.key("acme"), max_retries=0,
                      timeout=120, max_tokens=60)


@pytest.fixture
def chat_model(live):
    return _chat_model(live)


@pytest.fixture
def smol_chat_model(smol_live):
    return _chat_model(smol_live)


def test_langchain_bind_tools_with_tool_choice(chat_model):
    from langchain_core.tools import tool

    @tool
    def get_weather(city: Literal["Paris", "Oslo", "Seoul"], metric: bool) -> str:
        """The weather in a city."""
        return "sunny"

    message = chat_model.bind_tools([get_weather], tool_choice="get_weather").invoke("Weather in Paris?")
    [call] = message.tool_calls
    assert call["name"] == "get_weather" and call["args"]["city"] in CITIES and call["id"]
    assert get_weather.invoke(call["args"]) == "sunny"
    message = chat_model.bind_tools([get_weather], tool_choice="any", parallel_tool_calls=False).invoke("Weather?")
    assert [c["name"] for c in message.tool_calls] == ["get_weather"]


def test_langchain_structured_output_function_calling(chat_model):
    weather = chat_model.with_structured_output(Weather, method="function_calling").invoke("Weather in Paris?")
    assert isinstance(weather, Weather)


def test_langchain_structured_output_json_schema(smol_chat_model):
    weather = smol_chat_model.with_structured_output(Weather, method="json_schema").invoke("Weather in Paris?")
    assert isinstance(weather, Weather)


def test_langchain_structured_output_json_mode(smol_chat_model):
    # json_mode holds the answer to some JSON object, not to the schema (LangChain reports a mismatch as a
    # parsing error): what the server guarantees is a JSON object.
    result = smol_chat_model.with_structured_output(Weather, method="json_mode", include_raw=True).invoke(
        'Reply in JSON: {"city": one of Paris, Oslo, Seoul, "metric": true or false}. The city is Paris.')
    raw = result["raw"]
    assert raw.response_metadata["finish_reason"] == "stop"
    assert isinstance(json.loads(raw.content), dict)


# --- LiteLLM ---
def _litellm_call(server):
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the price list from the internet
    import litellm

    def call(**kwargs):
        return litellm.completion(model="openai/terse", api_base=f"{server.url}/v1", api_key=server.key("acme"),
                                  messages=kwargs.pop("messages", ASK), max_tokens=60, num_retries=0, timeout=120,
                                  **kwargs)

    return call


def test_litellm_tools(live):
    response = _litellm_call(live)(tools=[WEATHER_TOOL], tool_choice=NAMED)
    [call] = response.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    _check_weather_arguments(call.function.arguments)
    assert response.choices[0].finish_reason == "tool_calls"


def test_litellm_json_mode(smol_live):
    call = _litellm_call(smol_live)
    response = call(response_format={"type": "json_schema", "json_schema": {
        "name": "weather", "schema": Weather.model_json_schema(), "strict": True}})
    Weather.model_validate_json(response.choices[0].message.content)
    response = call(response_format={"type": "json_object"},
                    messages=[{"role": "user", "content": 'Reply in JSON: {"city": "Paris", "metric": true}.'}])
    assert response.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(response.choices[0].message.content), dict)
