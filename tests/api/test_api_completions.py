"""/v1/chat/completions and /v1/completions in-process, against FakeEngine: shapes, overrides, prompts."""
from api import schemas
from api.models import ApiUsage
from tenants import services

CHAT = {"model": "terse", "messages": [{"role": "user", "content": "Hi"}]}


def _prompt_text(engine, request_index: int = -1) -> str:
    return engine.tokenizer.decode(engine.requests[request_index]["prompt_token_ids"])


def test_chat_completion_shape_and_usage(api, key, fake_engine):
    response = api.post("chat/completions", CHAT, key)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-") and body["model"] == "terse"
    choice = body["choices"][0]
    # the profile "terse" says max_tokens=5: the fake reply is cut there
    assert choice == {"index": 0, "message": {"role": "assistant", "content": "Hello"}, "logprobs": None,
                      "finish_reason": "length"}
    num_prompt = len(fake_engine.requests[0]["prompt_token_ids"])
    assert body["usage"] == {"prompt_tokens": num_prompt, "completion_tokens": 5, "total_tokens": num_prompt + 5,
                             "prompt_tokens_details": {"cached_tokens": 0}}
    # The documented schema describes exactly what is sent (nothing dropped, nothing missing).
    assert schemas.ChatCompletion.model_validate(body).model_dump(mode="json") == body


def test_request_fields_override_the_profile(api, key, fake_engine):
    body = {**CHAT, "temperature": 0.5, "top_p": 0.9, "max_completion_tokens": 3, "max_tokens": 99, "stop": ["\n"],
            "seed": 7, "presence_penalty": 0.1, "frequency_penalty": 0.2, "top_k": 40, "min_p": 0.05,
            "repetition_penalty": 1.1}
    assert api.post("chat/completions", body, key).status_code == 200
    params = fake_engine.requests[0]["params"]
    assert (params.temperature, params.top_p, params.max_tokens, params.stop_strings, params.seed) == (
        0.5, 0.9, 3, ["\n"], 7)  # max_completion_tokens wins over max_tokens
    assert (params.presence_penalty, params.frequency_penalty, params.top_k, params.min_p,
            params.repetition_penalty, params.n) == (0.1, 0.2, 40, 0.05, 1.1, 1)
    assert api.post("chat/completions", CHAT, key).status_code == 200
    assert fake_engine.requests[1]["params"].temperature == 0.0  # the profile's own value


def test_model_id_means_the_default_profile(api, key, fake_engine, settings):
    settings.PAGODA_MODEL = "/models/tiny-llama"  # a folder: its name is the model id
    response = api.post("chat/completions", {**CHAT, "model": "tiny-llama"}, key)
    assert response.status_code == 200
    assert fake_engine.requests[0]["params"].temperature == 0.7  # "chat", the built-in default profile
    usage = ApiUsage.objects.get()
    assert usage.profile.name == "chat" and usage.model == "tiny-llama"


def test_system_prompt_goes_first_and_the_tenant_key_is_passed(api, tenant, key, fake_engine):
    services.create_system_prompt(tenant, "Be nice.")
    messages = [{"role": "system", "content": "Client rules."}, {"role": "developer", "content": "Dev rules."},
                {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}]
    assert api.post("chat/completions", {**CHAT, "messages": messages}, key).status_code == 200
    text = _prompt_text(fake_engine)
    assert text == "<system>Be nice.<system>Client rules.<system>Dev rules.<user>Hi there<assistant>"
    assert text.startswith(fake_engine.tokenizer.decode(fake_engine.encode_system_prefix("Be nice.")))
    assert fake_engine.requests[0]["tenant"] == tenant.engine_key == "acme"


def test_without_a_system_prompt_the_clients_messages_are_used_as_sent(api, key, fake_engine):
    messages = [{"role": "system", "content": "Client rules."}, {"role": "user", "content": "Hi"}]
    assert api.post("chat/completions", {**CHAT, "messages": messages}, key).status_code == 200
    assert _prompt_text(fake_engine) == "<system>Client rules.<user>Hi<assistant>"


def test_profile_max_tokens_is_fitted_into_the_context(api, tenant, key, fake_engine):
    long = {**CHAT, "model": "chat", "messages": [{"role": "user", "content": "x" * 150}]}
    assert api.post("chat/completions", long, key).status_code == 200
    num_prompt = len(fake_engine.requests[0]["prompt_token_ids"])
    assert fake_engine.requests[0]["params"].max_tokens == fake_engine.max_model_len - num_prompt


def test_chat_stream_chunks(api, key, fake_engine):
    body = {**CHAT, "stream_options": {"include_usage": True}}
    response, events = api.stream("chat/completions", body, key)
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
    assert text == "Hello"
    finish = chunks[-2]["choices"][0]
    assert finish["delta"] == {} and finish["finish_reason"] == "length"
    assert all(c["usage"] is None for c in chunks[:-1])
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5
    for chunk in chunks:
        assert schemas.ChatCompletionChunk.model_validate(chunk).model_dump(mode="json", exclude_unset=True) == chunk
    usage = ApiUsage.objects.get()
    assert (usage.status_code, usage.stream, usage.finish_reason, usage.num_output_tokens) == (200, True, "length", 5)


def test_stream_without_include_usage_has_no_usage_chunk(api, key, fake_engine):
    _, events = api.stream("chat/completions", CHAT, key)
    assert events[-1] == "[DONE]" and events[-2]["choices"][0]["finish_reason"] == "length"
    assert all("usage" not in e for e in events[:-1])


def test_closing_the_stream_aborts_the_engine_request(api, key, fake_engine):
    fake_engine.reply = "a much longer reply than five tokens"
    response, events = api.stream("chat/completions", {**CHAT, "max_tokens": 30}, key, max_events=3)
    assert len(events) == 3 and "[DONE]" not in events
    request_id = fake_engine.requests[0]["request_id"]
    assert fake_engine.aborted == [request_id]
    usage = ApiUsage.objects.get()
    assert (usage.status_code, usage.error_code, usage.finish_reason) == (499, "client_disconnected", "abort")
    assert usage.num_output_tokens < 30


def test_chat_logprobs(api, key, fake_engine):
    body = {**CHAT, "logprobs": True, "top_logprobs": 2}
    response = api.post("chat/completions", body, key)
    assert fake_engine.requests[0]["params"].logprobs == 2
    content = response.json()["choices"][0]["logprobs"]["content"]
    assert [c["token"] for c in content] == list("Hello")
    assert content[0]["logprob"] == -0.25 and content[0]["bytes"] == list(b"H")
    assert [t["logprob"] for t in content[0]["top_logprobs"]] == [-0.25, -1.0]
    assert api.post("chat/completions", CHAT, key).json()["choices"][0]["logprobs"] is None
    assert fake_engine.requests[1]["params"].logprobs is None


def test_completion_is_raw_text_after_the_system_turn(api, tenant, key, fake_engine):
    services.create_system_prompt(tenant, "Be nice.")
    response = api.post("completions", {"model": "terse", "prompt": "Once upon", "max_tokens": 3, "logprobs": 1}, key)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["object"] == "text_completion" and body["id"].startswith("cmpl-")
    choice = body["choices"][0]
    assert (choice["text"], choice["finish_reason"]) == ("Hel", "length")
    assert choice["logprobs"]["tokens"] == ["H", "e", "l"] and choice["logprobs"]["text_offset"] == [0, 1, 2]
    assert _prompt_text(fake_engine) == "<system>Be nice.Once upon"
    assert schemas.Completion.model_validate(body).model_dump(mode="json") == body


def test_completion_takes_token_ids_and_streams(api, key, fake_engine):
    response, events = api.stream("completions", {"model": "terse", "prompt": [72, 105],
                                                  "stream_options": {"include_usage": True}}, key)
    assert fake_engine.requests[0]["prompt_token_ids"] == [72, 105]
    assert events[-1] == "[DONE]"
    assert "".join(e["choices"][0]["text"] for e in events[:-2]) == "Hello"
    assert events[-3]["choices"][0]["finish_reason"] == "length"
    assert events[-2]["choices"] == [] and events[-2]["usage"]["prompt_tokens"] == 2


def test_models_lists_the_model_id_and_the_tenants_profiles_only(api, tenant, other_tenant, key, settings):
    settings.PAGODA_MODEL = "smollm2-135m-instruct"
    body = api.get("models", key).json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["smollm2-135m-instruct", "chat", "coding", "terse"]
    assert all(m["object"] == "model" and "max_model_len" in m for m in body["data"])
    assert {m["owned_by"] for m in body["data"][1:]} == {"acme"}
    assert schemas.ModelList.model_validate(body).model_dump(mode="json") == body
    assert api.get("models/terse", key).json()["id"] == "terse"
    assert api.get("models/globex-only", key).status_code == 404


# --- n choices, logit_bias, echo, the tokenizer endpoints ---
def test_n_choices_are_separate_engine_requests_with_distinct_seeds(api, key, fake_engine):
    body = api.post("chat/completions", {**CHAT, "n": 3, "seed": 10, "logit_bias": {"42": -5}}, key).json()
    assert [c["index"] for c in body["choices"]] == [0, 1, 2]
    assert all(c["message"]["content"] == "Hello" for c in body["choices"])
    params = [r["params"] for r in fake_engine.requests]
    assert [p.seed for p in params] == [10, 11, 12] and all(p.logit_bias == {42: -5} for p in params)
    num_prompt = len(fake_engine.requests[0]["prompt_token_ids"])
    assert body["usage"]["prompt_tokens"] == num_prompt and body["usage"]["completion_tokens"] == 15
    assert ApiUsage.objects.get().num_output_tokens == 15
    assert schemas.ChatCompletion.model_validate(body).model_dump(mode="json") == body


def test_n_choices_stream_with_their_index(api, key, fake_engine):
    response, events = api.stream("chat/completions", {**CHAT, "n": 2, "stream_options": {"include_usage": True}},
                                  key)
    chunks = [e for e in events if e != "[DONE]" and e["choices"]]
    for index in (0, 1):
        mine = [c["choices"][0] for c in chunks if c["choices"][0]["index"] == index]
        assert mine[0]["delta"] == {"role": "assistant", "content": ""}
        assert "".join(c["delta"].get("content", "") for c in mine) == "Hello"
        assert [c["finish_reason"] for c in mine if c["finish_reason"]] == ["length"]
    assert events[-2]["usage"]["completion_tokens"] == 10 and events[-1] == "[DONE]"


def test_n_choices_in_completions_and_a_seed_past_the_range(api, key, fake_engine):
    body = api.post("completions", {"model": "terse", "prompt": "Hi", "n": 2}, key).json()
    assert [(c["index"], c["text"]) for c in body["choices"]] == [(0, "Hello"), (1, "Hello")]
    error = api.post("completions", {"model": "terse", "prompt": "Hi", "n": 2, "seed": 2 ** 64 - 1}, key).json()
    assert error["error"]["param"] == "seed"  # the second choice's seed would overflow


def test_echo_puts_the_prompt_first(api, key, fake_engine):
    body = api.post("completions", {"model": "terse", "prompt": "Hi ", "echo": True}, key).json()
    assert body["choices"][0]["text"] == "Hi Hello"
    _, events = api.stream("completions", {"model": "terse", "prompt": "Hi ", "echo": True}, key)
    assert "".join(e["choices"][0]["text"] for e in events if e != "[DONE]" and e["choices"]) == "Hi Hello"


def test_text_parts_in_every_role(api, key, fake_engine):
    def part(text):
        return [{"type": "text", "text": text}]

    messages = [{"role": "system", "content": part("Be")}, {"role": "user", "content": part("Hi")},
                {"role": "assistant", "content": part("Yo")}, {"role": "user", "content": "again"}]
    assert api.post("chat/completions", {**CHAT, "messages": messages}, key).status_code == 200
    assert _prompt_text(fake_engine).endswith("<system>Be<user>Hi<assistant>Yo<user>again<assistant>")


def test_tokenize_counts_what_a_completion_is_charged(api, key, fake_engine):
    tokens = api.post("tokenize", {"messages": CHAT["messages"], "return_token_strs": True}, key).json()
    completion = api.post("chat/completions", CHAT, key).json()
    assert tokens["count"] == completion["usage"]["prompt_tokens"] == len(tokens["tokens"])
    assert "".join(tokens["token_strs"]).endswith("<user>Hi<assistant>")
    assert tokens["max_model_len"] == fake_engine.max_model_len
    assert api.post("detokenize", {"tokens": [72, 105]}, key).json() == {"prompt": "Hi"}
    error = api.post("tokenize", {"prompt": "a", "messages": CHAT["messages"]}, key)
    assert error.status_code == 400
    assert api.post("tokenize", {"model": "nope", "prompt": "a"}, key).status_code == 404


def test_vllm_extra_sampling_fields_reach_the_engine(api, key, fake_engine):
    extras = {"stop_token_ids": [7, 9], "include_stop_str_in_output": True, "skip_special_tokens": False,
              "bad_words": ["darn"], "allowed_token_ids": [72, 101, 108]}
    for path, body in (("chat/completions", CHAT), ("completions", {"model": "terse", "prompt": "Hi"})):
        assert api.post(path, {**body, **extras}, key).status_code == 200
        params = fake_engine.requests[-1]["params"]
        assert {name: getattr(params, name) for name in extras} == extras
    for field, value in (("bad_words", [""]), ("stop_token_ids", [-1]), ("allowed_token_ids", []),
                         ("include_stop_str_in_output", "yes")):
        error = api.post("chat/completions", {**CHAT, field: value}, key).json()["error"]
        assert error["param"] == field, error
