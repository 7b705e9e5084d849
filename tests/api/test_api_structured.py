"""Structured outputs in /v1, in-process against FakeEngine: what each field becomes in the engine's
SamplingParams, and the 400s for a bad or doubled constraint (before anything reaches the engine)."""
import pytest

from inference import StructuredOutputsParams

CHAT = {"model": "terse", "messages": [{"role": "user", "content": "Hi"}]}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _constraint(fake_engine) -> StructuredOutputsParams | None:
    return fake_engine.requests[-1]["params"].structured_outputs


def _error(response) -> dict:
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and not error["message"].startswith("[")
    return error


@pytest.mark.parametrize("extra, expected", [
    ({"response_format": {"type": "json_object"}}, StructuredOutputsParams(json_object=True)),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "place", "schema": SCHEMA, "strict": True}}},
     StructuredOutputsParams(json=SCHEMA)),
    ({"structured_outputs": {"regex": "[0-9]+", "disable_any_whitespace": True}},
     StructuredOutputsParams(regex="[0-9]+", disable_any_whitespace=True)),
    ({"guided_json": SCHEMA}, StructuredOutputsParams(json=SCHEMA)),
    ({"guided_choice": ["yes", "no"]}, StructuredOutputsParams(choice=["yes", "no"])),
    ({"guided_regex": "a|b"}, StructuredOutputsParams(regex="a|b")),
    ({"guided_grammar": 'root ::= "x"'}, StructuredOutputsParams(grammar='root ::= "x"')),
])
def test_each_field_becomes_the_engines_constraint(api, key, fake_engine, extra, expected):
    assert api.post("chat/completions", {**CHAT, **extra}, key).status_code == 200
    assert _constraint(fake_engine) == expected


def test_text_format_and_no_field_mean_no_constraint(api, key, fake_engine):
    assert api.post("chat/completions", {**CHAT, "response_format": {"type": "text"}}, key).status_code == 200
    assert api.post("chat/completions", CHAT, key).status_code == 200
    assert [r["params"].structured_outputs for r in fake_engine.requests] == [None, None]


def test_completions_take_vllms_fields_and_n_choices_share_the_constraint(api, key, fake_engine):
    body = {"model": "terse", "prompt": "Answer:", "n": 2, "structured_outputs": {"choice": ["yes", "no"]}}
    assert api.post("completions", body, key).status_code == 200
    assert [r["params"].structured_outputs.choice for r in fake_engine.requests] == [["yes", "no"]] * 2


@pytest.mark.parametrize("extra, param, words", [
    ({"response_format": {"type": "xml"}}, "response_format.type", "json_schema"),
    ({"response_format": {"type": "json_schema"}}, "response_format.json_schema", "name"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "a b", "schema": SCHEMA}}},
     "response_format.json_schema.name", "letters"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "objekt"}}}},
     "response_format.json_schema.schema", "objekt"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": "{}"}}},
     "response_format.json_schema.schema", "object"),
    ({"structured_outputs": {"regex": "(unclosed"}}, "structured_outputs", "parenthesis"),
    ({"structured_outputs": {"json": SCHEMA, "regex": "a"}}, "structured_outputs", "exactly one"),
    ({"structured_outputs": {"grammar": "root ::= nothing_here"}}, "structured_outputs", "nothing_here"),
    ({"structured_outputs": {"whitespace_pattern": " ", "json": SCHEMA}}, "structured_outputs", "whitespace_pattern"),
    ({"structured_outputs": {"jsn": SCHEMA}}, "structured_outputs", "jsn"),
    ({"guided_regex": "[z-a]"}, "guided_regex", "guided_regex"),
    ({"guided_choice": []}, "guided_choice", "non-empty"),
    ({"guided_json": SCHEMA, "response_format": {"type": "json_object"}}, "guided_json", "one output constraint"),
])
def test_bad_constraint_is_400_naming_the_field(api, key, fake_engine, extra, param, words):
    error = _error(api.post("chat/completions", {**CHAT, **extra}, key))
    assert error["param"] == param and words in error["message"], error
    assert not fake_engine.requests
