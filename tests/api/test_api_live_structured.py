"""Structured outputs through the live server (the real engine on a tiny random model), driven with the
official `openai` client: a random model's output still fits the constraint, because the grammar engine
allows nothing else."""
import json

import jsonschema_rs
import openai
import pytest

CHAT = [{"role": "user", "content": "Give me a record."}]
SCHEMA = {
    "type": "object",
    "properties": {"status": {"enum": ["open", "closed"]}, "urgent": {"type": "boolean"},
                   "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{2}$"}},
    "required": ["status", "urgent", "code"],
    "additionalProperties": False,
}


@pytest.fixture
def client(live):
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key=live.key("acme"), max_retries=0, timeout=120)


def test_structured_outputs_fit_the_schema_plain_and_streamed(client):
    body = {"structured_outputs": {"json": SCHEMA, "disable_any_whitespace": True}}
    done = client.chat.completions.create(model="chat", messages=CHAT, max_tokens=60, temperature=0, n=2,
                                          seed=1, extra_body=body)
    for choice in done.choices:
        assert choice.finish_reason == "stop"
        jsonschema_rs.validate(SCHEMA, json.loads(choice.message.content))
    stream = client.chat.completions.create(model="chat", messages=CHAT, max_tokens=60, temperature=0, stream=True,
                                            extra_body={"guided_choice": ["alpha", "beta", "gamma"]})
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) in ("alpha", "beta", "gamma")
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_response_format_json_schema_is_enforced(client):
    response_format = {"type": "json_schema", "json_schema": {"name": "record", "schema": SCHEMA, "strict": True}}
    done = client.chat.completions.create(model="chat", messages=CHAT, max_tokens=200, temperature=0,
                                          response_format=response_format)
    choice = done.choices[0]
    assert choice.finish_reason in ("stop", "length")
    text = choice.message.content
    assert text.lstrip().startswith("{")
    if choice.finish_reason == "stop":  # a random model may spend its tokens on the whitespace JSON allows
        jsonschema_rs.validate(SCHEMA, json.loads(text))


def test_a_bad_schema_is_a_400_naming_it(client):
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="chat", messages=CHAT, response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "objekt"}}})
    error = info.value.response.json()["error"]
    assert error["param"] == "response_format.json_schema.schema" and "objekt" in error["message"]
