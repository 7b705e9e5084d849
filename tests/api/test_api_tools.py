"""Tool calling in /v1/chat/completions, in-process against FakeEngine (whose tokenizer has no chat
template, so its answers are read with the Hermes parser): tools reaching the prompt, the model's calls
parsed into `tool_calls` (whole and streamed as OpenAI streams them), the history checked with 400s."""
import json

import pytest

from api import schemas

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TWO_CALLS = CALL + '\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'


@pytest.fixture
def engine(fake_engine):
    fake_engine.max_model_len = 1000
    return fake_engine


def _ask(api, key, reply_engine, reply: str, **fields):
    reply_engine.reply = reply
    body = {"model": "terse", "max_tokens": 300, "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": [WEATHER_TOOL, TIME_TOOL], **fields}
    return api.post("chat/completions", body, key)


def _prompt(engine) -> str:
    return engine.tokenizer.decode(engine.requests[-1]["prompt_token_ids"])


def test_a_call_comes_back_as_tool_calls_with_null_content(api, key, engine):
    response = _ask(api, key, engine, CALL)
    assert response.status_code == 200, response.content
    body = response.json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["content"] is None
    [call] = message["tool_calls"]
    assert call["id"].startswith("call_") and call["type"] == "function"
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert schemas.ChatCompletion.model_validate(body).model_dump(mode="json", exclude_unset=True) == body
    assert _prompt(engine).startswith("<tools>get_weather,get_time")  # the tools reached the template


def test_text_before_calls_and_parallel_calls(api, key, engine):
    message = _ask(api, key, engine, "Let me check both.\n" + TWO_CALLS).json()["choices"][0]["message"]
    assert message["content"] == "Let me check both."
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather", "get_time"]
    assert len({c["id"] for c in message["tool_calls"]}) == 2


def test_parallel_tool_calls_false_keeps_the_first_call(api, key, engine):
    message = _ask(api, key, engine, TWO_CALLS, parallel_tool_calls=False).json()["choices"][0]["message"]
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]


def test_malformed_call_is_plain_content(api, key, engine):
    reply = '<tool_call>\n{"name": "get_weather", "arguments": {"city": \n</tool_call>'
    choice = _ask(api, key, engine, reply).json()["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": reply}
    assert choice["finish_reason"] == "stop"


def test_tool_choice_none_leaves_tools_out_and_text_as_it_is(api, key, engine):
    choice = _ask(api, key, engine, CALL, tool_choice="none").json()["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": CALL}
    assert "<tools>" not in _prompt(engine)


def test_a_call_cut_by_max_tokens_is_content_with_length(api, key, engine):
    choice = _ask(api, key, engine, CALL, max_tokens=30).json()["choices"][0]
    assert choice["finish_reason"] == "length" and choice["message"]["content"] == CALL[:30]
    assert "tool_calls" not in choice["message"]


def _stream(api, key, engine, reply: str, **fields):
    engine.reply = reply
    body = {"model": "terse", "max_tokens": 300, "messages": [{"role": "user", "content": "Weather?"}],
            "tools": [WEATHER_TOOL, TIME_TOOL], **fields}
    response, events = api.stream("chat/completions", body, key)
    assert response.status_code == 200
    assert events[-1] == "[DONE]"
    return [e for e in events[:-1]]


def test_streamed_calls_as_openai_sends_them(api, key, engine):
    events = _stream(api, key, engine, "Checking.\n" + TWO_CALLS)
    for event in events:
        schemas.ChatCompletionChunk.model_validate(event)
    deltas = [e["choices"][0]["delta"] for e in events]
    assert deltas[0] == {"role": "assistant", "content": None}
    assert "".join(d.get("content") or "" for d in deltas) == "Checking."
    tool_deltas = [tc for d in deltas for tc in d.get("tool_calls", [])]
    # each call: a first delta with id, type, name and empty arguments, then argument fragments by index
    firsts = [tc for tc in tool_deltas if "id" in tc]
    assert [(tc["index"], tc["type"], tc["function"]) for tc in firsts] == [
        (0, "function", {"name": "get_weather", "arguments": ""}), (1, "function", {"name": "get_time", "arguments": ""})]
    for index, expected in ((0, {"city": "Paris"}), (1, {})):
        fragments = [tc["function"]["arguments"] for tc in tool_deltas if tc["index"] == index and "id" not in tc]
        assert all(set(tc) == {"index", "function"} for tc in tool_deltas if "id" not in tc)
        assert json.loads("".join(fragments)) == expected
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert [e["choices"][0]["finish_reason"] for e in events[:-1]] == [None] * (len(events) - 1)


def test_streamed_plain_answer_with_tools_offered_is_content(api, key, engine):
    events = _stream(api, key, engine, "It is sunny.")
    deltas = [e["choices"][0]["delta"] for e in events]
    assert "".join(d.get("content") or "" for d in deltas) == "It is sunny."
    assert not any("tool_calls" in d for d in deltas)
    assert events[-1]["choices"][0]["finish_reason"] == "stop"


def test_streamed_n_choices_each_with_its_call(api, key, engine):
    events = _stream(api, key, engine, CALL, n=2)
    for index in (0, 1):
        names = [tc["function"].get("name") for e in events for c in e["choices"] if c["index"] == index
                 for tc in c["delta"].get("tool_calls", []) if "id" in tc]
        assert names == ["get_weather"]


# --- the history ---
HISTORY = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
]


def test_history_with_calls_and_results_reaches_the_template(api, key, engine):
    response = _ask(api, key, engine, "It is sunny.", messages=HISTORY)
    assert response.status_code == 200, response.content
    assert response.json()["choices"][0]["message"]["content"] == "It is sunny."
    prompt = _prompt(engine)
    assert '<assistant><call>get_weather({"city": "Paris"})<tool>sunny, 21 C<assistant>' in prompt


def _with(index: int, **changes) -> list[dict]:
    messages = json.loads(json.dumps(HISTORY))
    messages[index].update(changes)
    return messages


@pytest.mark.parametrize("messages, param, words", [
    (_with(2, tool_call_id="call_9"), "messages[2].tool_call_id", "Unknown tool_call_id"),
    (HISTORY + [{"role": "tool", "tool_call_id": "call_1", "content": "again"}], "messages[3].tool_call_id",
     "answered already"),
    (_with(2, tool_call_id=None), "messages[2].tool_call_id", "needs `tool_call_id`"),
    (_with(1, tool_calls=[{"id": "call_1", "type": "function",
                           "function": {"name": "get_weather", "arguments": "{city: Paris}"}}]),
     "messages[1].tool_calls[0].function.arguments", "not valid JSON"),
    (_with(1, tool_calls=[{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "[1]"}}]),
     "messages[1].tool_calls[0].function.arguments", "JSON object"),
    (_with(1, tool_calls=[{"id": "call_1", "type": "function", "function": {"arguments": "{}"}}]),
     "messages[1].tool_calls[0].function.name", "required"),
    (_with(1, tool_calls=[{"id": "call_1", "type": "function", "function": {"name": "", "arguments": "{}"}}]),
     "messages[1].tool_calls[0].function.name", "name"),
    (_with(1, tool_calls=None), "messages[1].content", "null only in an assistant message with tool_calls"),
    (HISTORY[:2], "messages[1]", "no answer to call_1"),
    (HISTORY[:2] + [{"role": "user", "content": "and?"}], "messages[2]", "no answer to call_1"),
    (_with(0, tool_calls=HISTORY[1]["tool_calls"]), "messages[0].tool_calls", "Only assistant"),
    (_with(0, tool_call_id="call_1"), "messages[0].tool_call_id", "Only tool messages"),
])
def test_bad_history_is_a_400_naming_the_field(api, key, engine, messages, param, words):
    response = _ask(api, key, engine, "x", messages=messages)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["param"] == param and words in error["message"], error
    assert not engine.requests


@pytest.mark.parametrize("fields, param", [
    ({"tools": [WEATHER_TOOL, WEATHER_TOOL]}, "tools[1].function.name"),
    ({"tool_choice": {"type": "function", "function": {"name": "get_stock"}}}, "tool_choice.function.name"),
    ({"tool_choice": {"type": "function"}}, "tool_choice"),
    ({"function_call": "auto"}, "function_call"),
    ({"parallel_tool_calls": "yes"}, "parallel_tool_calls"),
])
def test_bad_tools_and_tool_choice_are_400s(api, key, engine, fields, param):
    response = _ask(api, key, engine, "x", **fields)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["param"] == param
    assert not engine.requests


# --- required and named: the grammar engine holds the answer to the call's schema ---
def test_named_function_is_constrained_to_its_parameters_and_answers_one_call(api, key, engine):
    choice = _ask(api, key, engine, '{"city": "Paris"}',
                  tool_choice={"type": "function", "function": {"name": "get_weather"}}).json()["choices"][0]
    constraint = engine.requests[-1]["params"].structured_outputs
    assert constraint.json == WEATHER_TOOL["function"]["parameters"]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    [call] = choice["message"]["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}


def test_named_function_streams_its_arguments_as_they_come(api, key, engine):
    events = _stream(api, key, engine, '{"city": "Paris"}',
                     tool_choice={"type": "function", "function": {"name": "get_weather"}})
    tool_deltas = [tc for e in events for tc in e["choices"][0]["delta"].get("tool_calls", [])]
    assert tool_deltas[0]["function"] == {"name": "get_weather", "arguments": ""} and tool_deltas[0]["id"]
    fragments = [tc["function"]["arguments"] for tc in tool_deltas[1:]]
    assert len(fragments) == len('{"city": "Paris"}')  # the fake engine sends one character per delta
    assert "".join(fragments) == '{"city": "Paris"}'
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_required_is_constrained_to_a_list_of_calls(api, key, engine):
    reply = '[{"name": "get_time", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "Oslo"}}]'
    message = _ask(api, key, engine, reply, tool_choice="required").json()["choices"][0]["message"]
    schema = engine.requests[-1]["params"].structured_outputs.json
    assert schema["type"] == "array" and schema["minItems"] == 1 and "maxItems" not in schema
    assert [s["properties"]["name"] for s in schema["items"]["anyOf"]] == [{"const": "get_weather"},
                                                                           {"const": "get_time"}]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]] == [
        ("get_time", {}), ("get_weather", {"city": "Oslo"})]
    _ask(api, key, engine, reply, tool_choice="required", parallel_tool_calls=False)
    assert engine.requests[-1]["params"].structured_outputs.json["maxItems"] == 1



def test_a_forced_call_beside_another_constraint_is_a_400(api, key, engine):
    response = _ask(api, key, engine, "{}", tool_choice="required", response_format={"type": "json_object"})
    assert response.status_code == 400, response.content
    assert response.json()["error"]["param"] == "tool_choice"
    assert not engine.requests


def test_tokenize_counts_the_tools_a_chat_completion_shows(api, key, engine):
    body = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER_TOOL, TIME_TOOL]}
    tokens = api.post("tokenize", body, key).json()
    plain = api.post("tokenize", {"messages": body["messages"]}, key).json()
    charged = _ask(api, key, engine, "It is sunny.").json()["usage"]["prompt_tokens"]
    assert tokens["count"] == charged > plain["count"]
    assert engine.tokenizer.decode(tokens["tokens"]).startswith("<tools>get_weather,get_time")
    refused = api.post("tokenize", {"prompt": "Hi", "tools": [WEATHER_TOOL]}, key)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "tools"
