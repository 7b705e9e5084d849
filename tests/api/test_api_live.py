"""The API as company tools see it: the official `openai` package against a live server on 127.0.0.1
(daphne, the real engine on a tiny random model; see api_live_server.py). Answers are short."""
import hashlib
import time
from pathlib import Path

import httpx
import openai
import pytest

CHAT = [{"role": "user", "content": "Hello!"}]


@pytest.fixture
def client(live):
    """client(key name) -> an OpenAI client for that seeded key (no retries: a 429 must surface)."""
    return lambda name="acme": openai.OpenAI(base_url=f"{live.url}/v1", api_key=live.key(name), max_retries=0,
                                             timeout=60)


def _usage_row(live, request_id: str) -> dict:
    for _ in range(50):  # a streamed answer's row is written just after its last event
        row = live.db.row("SELECT * FROM tenants_apiusage WHERE request_id = %s", (request_id,))
        if row is not None:
            return row
        time.sleep(0.1)
    raise AssertionError(f"no usage row for {request_id}")


def _pinned_tokens(live, tenant: str) -> int:
    return live.engine_stats()["pins"][f"tenant:{tenant}"]["num_tokens"]


def test_models_list(live, client, tiny_llama_path):
    models = client().models.list().data
    assert [m.id for m in models] == [Path(tiny_llama_path).name, "chat", "coding", "terse"]
    assert all(m.object == "model" and m.to_dict()["max_model_len"] == 512 for m in models)
    assert [m.owned_by for m in models] == ["pagoda", "acme", "acme", "acme"]


def test_chat_completion_uses_the_pinned_system_prompt(live, client):
    response = client().chat.completions.create(model="terse", messages=CHAT, max_tokens=4)
    choice = response.choices[0]
    assert choice.finish_reason == "length" and choice.message.role == "assistant"
    assert isinstance(choice.message.content, str)
    usage = response.usage
    assert usage.completion_tokens == 4 and usage.total_tokens == usage.prompt_tokens + 4
    # The tenant's system prompt went first, so its pinned blocks were a prefix-cache hit.
    assert usage.prompt_tokens_details.cached_tokens >= _pinned_tokens(live, "acme") > 0
    row = _usage_row(live, response.id)
    assert (row["status_code"], row["endpoint"], row["finish_reason"], row["api_key_id"], row["tenant_id"]) == (
        200, "chat.completions", "length", live.keys["acme"]["id"], live.keys["acme"]["tenant_id"])
    assert (row["num_prompt_tokens"], row["num_output_tokens"], row["num_cached_tokens"]) == (
        usage.prompt_tokens, 4, usage.prompt_tokens_details.cached_tokens)
    assert row["latency_ms"] is not None


def test_chat_stream(live, client):
    request = dict(model="terse", messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=6)
    whole = client().chat.completions.create(**request)
    chunks = list(client().chat.completions.create(**request, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert len({c.id for c in chunks}) == 1 and chunks[0].object == "chat.completion.chunk"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content  # greedy ("terse" has temperature 0)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 6
    assert _usage_row(live, chunks[0].id)["stream"] in (True, 1)


def test_completions(live, client, tiny_llama_path):
    model = Path(tiny_llama_path).name  # the model id: the tenant's default profile
    response = client().completions.create(model=model, prompt="Once upon a time", max_tokens=3, temperature=0)
    assert response.choices[0].finish_reason == "length" and response.usage.completion_tokens == 3
    chunks = list(client().completions.create(model=model, prompt="Once upon a time", max_tokens=3, temperature=0,
                                              stream=True))
    assert "".join(c.choices[0].text for c in chunks) == response.choices[0].text


def test_error_answers(live, client):
    with pytest.raises(openai.AuthenticationError) as bad_key:
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="pgd-not-a-key", max_retries=0).models.list()
    assert bad_key.value.status_code == 401 and bad_key.value.code == "invalid_api_key"
    with pytest.raises(openai.PermissionDeniedError) as revoked:
        client("acme_revoked").chat.completions.create(model="terse", messages=CHAT, max_tokens=1)
    assert revoked.value.code == "api_key_revoked"
    with pytest.raises(openai.BadRequestError) as bad_field:
        client().chat.completions.create(model="terse", messages=CHAT, temperature=-1)
    assert bad_field.value.param == "temperature"
    with pytest.raises(openai.BadRequestError) as bad_extra:
        client().chat.completions.create(model="terse", messages=CHAT, extra_body={"top_k": -5})
    assert bad_extra.value.param == "top_k"
    with pytest.raises(openai.NotFoundError) as unknown:
        client().chat.completions.create(model="gpt-4o", messages=CHAT)
    assert unknown.value.param == "model" and unknown.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as too_long:
        client().chat.completions.create(model="terse", messages=[{"role": "user", "content": "word " * 600}])
    assert too_long.value.code == "context_length_exceeded" and "512" in too_long.value.message


def test_rate_limit_answers_429_with_retry_after(live, client):
    limited = client("acme_rpm2")
    for _ in range(2):
        limited.chat.completions.create(model="terse", messages=CHAT, max_tokens=1)
    with pytest.raises(openai.RateLimitError) as limit:
        limited.chat.completions.create(model="terse", messages=CHAT, max_tokens=1)
    assert 1 <= int(limit.value.response.headers["retry-after"]) <= 60
    assert limit.value.code == "rate_limit_exceeded"


def test_tenant_isolation(live, client):
    with pytest.raises(openai.NotFoundError):
        client("acme").chat.completions.create(model="globex-only", messages=CHAT, max_tokens=1)
    assert "terse" not in [m.id for m in client("globex").models.list().data]
    # Prefix-cache hits never cross tenants: Initech (no system prompt of its own) sends exactly the
    # prompt Globex's requests start with; Globex hits its pinned blocks, Initech computes them.
    globex = client("globex").chat.completions.create(model="chat", messages=CHAT, max_tokens=1)
    initech = client("initech").chat.completions.create(
        model="chat", messages=[{"role": "system", "content": live.prompts["globex"]}, *CHAT], max_tokens=1)
    assert initech.usage.prompt_tokens == globex.usage.prompt_tokens  # the same tokens
    assert globex.usage.prompt_tokens_details.cached_tokens >= _pinned_tokens(live, "globex") > 0
    assert initech.usage.prompt_tokens_details.cached_tokens == 0


def test_disconnect_mid_stream_aborts_the_request(live, client):
    before = live.engine_stats()["stats"]
    assert before["num_running"] == 0
    stream = client().chat.completions.create(model="terse", messages=CHAT, max_tokens=400, stream=True,
                                              extra_body={"ignore_eos": True})
    chunks = [next(stream) for _ in range(3)]
    assert live.engine_stats()["stats"]["num_running"] == 1
    stream.close()  # the client goes away mid-answer
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        stats = live.engine_stats()["stats"]
        if stats["num_running"] == 0 and stats["num_blocks_used"] == before["num_blocks_used"]:
            break
        time.sleep(0.1)
    assert (stats["num_running"], stats["num_waiting"], stats["num_blocks_used"]) == (0, 0, before["num_blocks_used"])
    row = _usage_row(live, chunks[0].id)
    assert (row["status_code"], row["error_code"], row["finish_reason"]) == (499, "client_disconnected", "abort")
    assert 0 < row["num_output_tokens"] < 400


def test_keys_are_stored_hashed_and_use_is_recorded(live, client):
    client().models.list()
    with pytest.raises(openai.PermissionDeniedError):
        client("acme_revoked").models.list()
    for name, key in live.keys.items():
        row = live.db.row("SELECT * FROM tenants_apikey WHERE id = %s", (key["id"],))
        assert row["hashed_key"] == hashlib.sha256(key["plaintext"].encode()).hexdigest()
        assert not any(key["plaintext"][12:] in str(value) for value in row.values())
    assert live.db.row("SELECT last_used_at FROM tenants_apikey WHERE id = %s",
                       (live.keys["acme"]["id"],))["last_used_at"] is not None
    refused = live.db.rows("SELECT status_code, error_code FROM tenants_apiusage WHERE api_key_id = %s",
                           (live.keys["acme_revoked"]["id"],))
    assert refused and all(r["status_code"] == 403 and r["error_code"] == "api_key_revoked" for r in refused)


def test_openapi_schema_is_served(live):
    schema = httpx.get(f"{live.url}/v1/openapi.json", timeout=10).json()
    assert {"/v1/chat/completions", "/v1/completions", "/v1/models"} <= set(schema["paths"])
    assert schema["components"]["securitySchemes"]["ApiKeyAuth"]["scheme"] == "bearer"
