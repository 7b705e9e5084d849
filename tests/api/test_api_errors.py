"""Error answers of /v1 in OpenAI's shape, in-process: auth, validation, models, context, engine state."""
import pytest
from asgiref.sync import async_to_sync

from inference.errors import QueueFullError
from api import services as api_services
from api.models import ApiUsage
from tenants import services

CHAT = {"model": "terse", "messages": [{"role": "user", "content": "Hi"}]}


def _error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    return error


# --- authentication ---
def test_missing_or_malformed_authorization_is_401(api, fake_engine, db):
    assert _error(api.post("chat/completions", CHAT, None), 401)["code"] == "invalid_api_key"
    for header in ("Basic abc", "Bearer", "Bearer "):
        response = api.post("chat/completions", CHAT, None, headers={"Authorization": header})
        assert _error(response, 401)["code"] == "invalid_api_key"


def test_unknown_key_is_401(api, key, fake_engine):
    assert _error(api.post("chat/completions", CHAT, key + "x"), 401)["type"] == "invalid_request_error"
    assert _error(api.get("models", "pgd-not-a-key"), 401)["code"] == "invalid_api_key"
    assert not ApiUsage.objects.exists()  # nobody to charge


def test_revoked_key_is_403_and_recorded(api, tenant, make_key, fake_engine):
    key, plaintext = make_key(tenant)
    assert api.post("chat/completions", CHAT, plaintext).status_code == 200
    api_services.revoke_api_key(key)
    error = _error(api.post("chat/completions", CHAT, plaintext), 403)
    assert (error["type"], error["code"]) == ("permission_error", "api_key_revoked")
    assert _error(api.get("models", plaintext), 403)["code"] == "api_key_revoked"
    rows = list(ApiUsage.objects.order_by("id").values_list("endpoint", "status_code"))
    assert rows == [("chat.completions", 200), ("chat.completions", 403), ("models", 403)]


def test_key_of_a_deactivated_tenant_is_403(api, tenant, key, fake_engine):
    services.update_tenant(tenant, is_active=False)
    assert _error(api.post("chat/completions", CHAT, key), 403)["code"] == "tenant_inactive"


def test_last_used_at_is_recorded(api, tenant, make_key, fake_engine):
    key, plaintext = make_key(tenant)
    assert key.last_used_at is None
    api.get("models", plaintext)
    key.refresh_from_db()
    assert key.last_used_at is not None


# --- validation: 400 naming the field ---
@pytest.mark.parametrize("field, value, param", [
    ("temperature", -1, "temperature"),
    ("temperature", "hot", "temperature"),
    ("top_p", 0, "top_p"),
    ("top_k", -5, "top_k"),  # a vLLM extra field
    ("min_p", 2, "min_p"),
    ("repetition_penalty", 0, "repetition_penalty"),
    ("presence_penalty", 3, "presence_penalty"),
    ("frequency_penalty", -3, "frequency_penalty"),
    ("max_tokens", 0, "max_tokens"),
    ("max_completion_tokens", 0, "max_completion_tokens"),
    ("stop", [""], "stop"),
    ("seed", "abc", "seed"),
    ("n", 0, "n"),
    ("n", 129, "n"),
    ("seed", 2 ** 64, "seed"),  # past torch's generator: refused before the engine
    ("seed", -(2 ** 63) - 1, "seed"),
    # types are strict, as OpenAI's are: no coercion of strings, booleans or non-finite numbers
    ("stream", "yes", "stream"),
    ("max_tokens", "10", "max_tokens"),
    ("max_tokens", True, "max_tokens"),
    ("temperature", True, "temperature"),
    ("stream_options", "x", "stream_options"),
    ("logprobs", "true", "logprobs"),
    ("model", "terse\u0000", "model"),  # PostgreSQL cannot compare it: a 400, not a 503
    ("top_logprobs", 30, "top_logprobs"),
    ("tools", [{"type": "function", "function": {"name": "f"}}], "tools"),
    ("response_format", {"type": "xml"}, "response_format.type"),
    ("logit_bias", {"42": 101}, "logit_bias"),
    ("logit_bias", {"abc": 1}, "logit_bias"),
    ("prompt_logprobs", 21, "prompt_logprobs"),
    ("messages", [], "messages"),
    ("messages", [{"role": "robot", "content": "Hi"}], "messages[0].role"),
    ("messages", [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], "messages[0].content[0]"),
])
def test_invalid_field_is_400_naming_it(api, key, fake_engine, field, value, param):
    body = {**CHAT, field: value}
    if field == "top_logprobs":
        body["logprobs"] = True
    error = _error(api.post("chat/completions", body, key), 400)
    assert (error["type"], error["param"]) == ("invalid_request_error", param), error
    assert not fake_engine.requests


def test_top_logprobs_without_logprobs_is_400(api, key, fake_engine):
    assert _error(api.post("chat/completions", {**CHAT, "top_logprobs": 2}, key), 400)["param"] == "top_logprobs"


@pytest.mark.parametrize("raw", ['Infinity', '-Infinity', 'NaN', '1e400'])
def test_non_finite_numbers_are_400(api, key, fake_engine, raw):
    body = '{"model": "terse", "messages": [{"role": "user", "content": "Hi"}], "temperature": %s}' % raw
    assert _error(api.post("chat/completions", body, key), 400)["param"] == "temperature"
    assert not fake_engine.requests


@pytest.mark.parametrize("field, value, param", [
    ("max_tokens", 0, "max_tokens"),  # only with echo (a scoring call)
    ("best_of", 3, "best_of"), ("suffix", "x", "suffix"), ("prompt", ["a", "b"], "prompt"), ("prompt", "", "prompt"),
    ("prompt", [True, False], "prompt"), ("prompt_logprobs", -1, "prompt_logprobs"), ("n", "2", "n"),
])
def test_invalid_completion_field_is_400(api, key, fake_engine, field, value, param):
    body = {"model": "terse", "prompt": "Hi", field: value}
    error = _error(api.post("completions", body, key), 400)
    assert error["param"] == param, error
    assert not fake_engine.requests


def test_best_of_names_the_alternative(api, key, fake_engine):
    error = _error(api.post("completions", {"model": "terse", "prompt": "Hi", "best_of": 2}, key), 400)
    assert error["code"] == "unsupported_parameter" and "n choices" in error["message"]


def test_nul_in_model_is_400_and_recorded(api, key, fake_engine):
    error = _error(api.post("chat/completions", {**CHAT, "model": "te\u0000rse"}, key), 400)
    assert (error["param"], error["code"]) == ("model", "invalid_value")
    row = ApiUsage.objects.get()
    assert (row.status_code, row.error_code, row.model) == (400, "invalid_value", "te\ufffdrse")


def test_a_huge_prompt_is_refused_by_its_length_before_tokenizing(api, key, fake_engine, monkeypatch):
    calls = []
    monkeypatch.setattr(fake_engine.tokenizer, "encode", lambda *a, **kw: calls.append(a) or [1])
    body = {**CHAT, "messages": [{"role": "user", "content": "x" * 2_400_000}]}
    error = _error(api.post("chat/completions", body, key), 400)
    assert error["code"] == "context_length_exceeded" and "characters" in error["message"]
    error = _error(api.post("completions", {"model": "terse", "prompt": "x" * 2_400_000}, key), 400)
    assert (error["code"], error["param"]) == ("context_length_exceeded", "prompt")
    assert calls == [] and not fake_engine.requests


@pytest.mark.parametrize("method", ["get", "put", "delete", "patch"])
@pytest.mark.parametrize("path", ["chat/completions", "completions", "tokenize", "detokenize"])
def test_wrong_method_is_405_in_openai_shape(api, key, method, path):
    response = async_to_sync(getattr(api.client, method))(f"/v1/{path}", headers={"Authorization": f"Bearer {key}"})
    error = _error(response, 405)
    assert error["code"] == "method_not_allowed" and response["Allow"] == "POST"


def test_wrong_method_on_models_is_405(api, key):
    response = async_to_sync(api.client.post)("/v1/models", headers={"Authorization": f"Bearer {key}"})
    assert _error(response, 405)["code"] == "method_not_allowed" and response["Allow"] == "GET"


def test_body_that_is_not_json_is_400(api, key, fake_engine):
    assert _error(api.post("chat/completions", "{not json", key), 400)["type"] == "invalid_request_error"


# --- models ---
def test_unknown_model_is_404(api, key, fake_engine):
    error = _error(api.post("chat/completions", {**CHAT, "model": "gpt-4"}, key), 404)
    assert (error["param"], error["code"]) == ("model", "model_not_found")


def test_another_tenants_profile_is_404_and_invisible(api, key, other_tenant, make_key, fake_engine):
    error = _error(api.post("chat/completions", {**CHAT, "model": "globex-only"}, key), 404)
    assert error["code"] == "model_not_found" and "globex" not in error["message"].replace("globex-only", "")
    assert "globex-only" not in [m["id"] for m in api.get("models", key).json()["data"]]
    globex_key = make_key(other_tenant)[1]
    assert api.post("chat/completions", {**CHAT, "model": "globex-only"}, globex_key).status_code == 200
    assert _error(api.post("chat/completions", CHAT, globex_key), 404)["code"] == "model_not_found"  # acme's terse
    assert fake_engine.requests[-1]["tenant"] == "globex"


# --- context length ---
def test_prompt_longer_than_the_context_is_400_context_length_exceeded(api, key, fake_engine):
    body = {**CHAT, "messages": [{"role": "user", "content": "x" * 300}]}
    error = _error(api.post("chat/completions", body, key), 400)
    assert (error["code"], error["param"]) == ("context_length_exceeded", "messages")
    assert "200" in error["message"]
    assert not fake_engine.requests
    completion = _error(api.post("completions", {"model": "terse", "prompt": "x" * 300}, key), 400)
    assert (completion["code"], completion["param"]) == ("context_length_exceeded", "prompt")


def test_max_tokens_asked_beyond_the_context_is_400(api, key, fake_engine):
    body = {**CHAT, "messages": [{"role": "user", "content": "x" * 100}], "max_completion_tokens": 150}
    error = _error(api.post("chat/completions", body, key), 400)
    assert (error["code"], error["param"]) == ("context_length_exceeded", "max_completion_tokens")


# --- engine state ---
def test_engine_off_is_503_with_retry_after(api, key, settings, db):
    from runtime_testing import runtime_set_aside

    settings.PAGODA_ENGINE = "off"
    with runtime_set_aside():  # not the session's real engine, if an earlier test started it
        response = api.post("chat/completions", CHAT, key)
    error = _error(response, 503)
    assert (error["type"], error["code"]) == ("server_error", "engine_unavailable")
    assert int(response["Retry-After"]) >= 1
    assert ApiUsage.objects.get().status_code == 503


def test_engine_still_loading_is_503(api, key, monkeypatch, settings, db):
    from engine_runtime import runtime

    settings.PAGODA_ENGINE = "on"
    monkeypatch.setattr(runtime, "_state", "starting")
    monkeypatch.setattr(runtime, "_engine", None)
    monkeypatch.setattr(runtime._ready, "wait", lambda timeout=None: False)
    assert "loading" in _error(api.post("chat/completions", CHAT, key), 503)["message"]


def test_queue_full_is_429(api, key, fake_engine):
    fake_engine.raise_on_add = QueueFullError("4096 requests are waiting; try again shortly")
    response = api.post("chat/completions", CHAT, key)
    error = _error(response, 429)
    assert (error["type"], error["code"]) == ("rate_limit_error", "engine_overloaded")
    assert int(response["Retry-After"]) >= 1


def test_engine_failure_mid_stream_is_an_error_event(api, key, fake_engine):
    fake_engine.fail_after = 2
    response, events = api.stream("chat/completions", CHAT, key)
    assert response.status_code == 200
    assert events[-1]["error"]["code"] == "engine_unavailable" and "[DONE]" not in events
    usage = ApiUsage.objects.get()
    assert (usage.status_code, usage.error_code) == (503, "engine_unavailable")


def test_unknown_route_is_an_openai_404(api, key):
    assert _error(api.get("nothing/here", key), 404)["code"] == "unknown_url"
