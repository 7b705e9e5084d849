"""Prompt scoring through the API, in-process against FakeEngine: echo with logprobs on /v1/completions
(max_tokens 0 included) and vLLM's prompt_logprobs extra on both endpoints.

FakeEngine scores prompt token i (one per character) -i / 10 at rank i; the reply's tokens -0.25."""
from api import schemas
from tenants import services

ECHO = {"model": "terse", "prompt": "Hi ", "echo": True, "logprobs": 1}
REPLY = list("Hello")


def test_echo_with_logprobs_scores_the_prompt_then_the_reply(api, key, fake_engine):
    body = api.post("completions", ECHO, key).json()
    params = fake_engine.requests[0]["params"]
    assert (params.prompt_logprobs, params.logprobs) == (1, 1)
    choice = body["choices"][0]
    assert choice["text"] == "Hi Hello"
    lp = choice["logprobs"]
    # The fake tokenizer's BOS (id 1) decodes to "": it starts the prompt, so nothing scores it.
    assert lp["tokens"] == ["", "H", "i", " "] + REPLY
    assert lp["token_logprobs"] == [None, -0.1, -0.2, -0.3] + [-0.25] * 5
    assert lp["top_logprobs"][0] is None and lp["top_logprobs"][1] == {"a": -0.01}
    assert lp["text_offset"] == [0, 0, 1, 2, 3, 4, 5, 6, 7]
    assert schemas.Completion.model_validate(body).model_dump(mode="json") == body

    _, events = api.stream("completions", ECHO, key)
    chunks = [e["choices"][0] for e in events if e != "[DONE]" and e["choices"]]
    assert "".join(c["text"] for c in chunks) == "Hi Hello"
    streamed = [c["logprobs"] for c in chunks if c["logprobs"]]
    assert sum((s["tokens"] for s in streamed), []) == lp["tokens"]
    assert sum((s["token_logprobs"] for s in streamed), []) == lp["token_logprobs"]
    assert sum((s["text_offset"] for s in streamed), []) == lp["text_offset"]


def test_echo_scores_only_the_clients_text_after_the_system_turn(api, tenant, key, fake_engine):
    services.create_system_prompt(tenant, "Be nice.")
    lp = api.post("completions", ECHO, key).json()["choices"][0]["logprobs"]
    num_prefix = len("<system>Be nice.")
    # The system turn is never shown; the client's first token is scored in its context.
    assert lp["tokens"] == ["H", "i", " "] + REPLY
    assert lp["token_logprobs"][:3] == [-num_prefix / 10, -(num_prefix + 1) / 10, -(num_prefix + 2) / 10]


def test_echo_with_max_tokens_0_returns_the_scored_prompt_only(api, key, fake_engine):
    body = api.post("completions", {**ECHO, "max_tokens": 0}, key).json()
    assert fake_engine.requests[0]["params"].max_tokens == 1  # the engine samples one token, not shown
    choice = body["choices"][0]
    assert choice["text"] == "Hi " and choice["logprobs"]["tokens"] == ["", "H", "i", " "]
    assert choice["logprobs"]["token_logprobs"] == [None, -0.1, -0.2, -0.3]
    _, events = api.stream("completions", {**ECHO, "max_tokens": 0}, key)
    assert "".join(e["choices"][0]["text"] for e in events if e != "[DONE]" and e["choices"]) == "Hi "
    # without echo, max_tokens 0 asks for nothing
    error = api.post("completions", {"model": "terse", "prompt": "Hi", "max_tokens": 0}, key).json()["error"]
    assert error["param"] == "max_tokens"


def test_prompt_logprobs_extra_in_vllms_shape(api, key, fake_engine):
    body = api.post("completions", {"model": "terse", "prompt": "Hi", "prompt_logprobs": 1, "n": 2}, key).json()
    assert [r["params"].prompt_logprobs for r in fake_engine.requests] == [1, None]  # scored once
    for choice in body["choices"]:
        assert choice["prompt_logprobs"] == [
            None,
            {"72": {"logprob": -0.1, "rank": 1, "decoded_token": "H"},
             "97": {"logprob": -0.01, "rank": 1, "decoded_token": "a"}},
            {"105": {"logprob": -0.2, "rank": 2, "decoded_token": "i"},
             "97": {"logprob": -0.01, "rank": 1, "decoded_token": "a"}}]
        assert choice["logprobs"] is None

    chat = api.post("chat/completions", {"model": "terse", "messages": [{"role": "user", "content": "Yo"}],
                                         "prompt_logprobs": 0}, key).json()
    scored = chat["prompt_logprobs"]  # top level, as vLLM answers a chat completion
    prompt = fake_engine.requests[-1]["prompt_token_ids"]
    assert len(scored) == len(prompt) and scored[0] is None
    assert scored[-1] == {str(prompt[-1]): {"logprob": -(len(prompt) - 1) / 10, "rank": len(prompt) - 1,
                                            "decoded_token": chr(prompt[-1])}}


def test_prompt_logprobs_with_stream_is_400(api, key, fake_engine):
    for path, body in (("completions", {"model": "terse", "prompt": "Hi"}),
                       ("chat/completions", {"model": "terse", "messages": [{"role": "user", "content": "Hi"}]})):
        response, _ = api.stream(path, {**body, "prompt_logprobs": 1}, key)
        assert response.status_code == 400 and response.json()["error"]["param"] == "prompt_logprobs"
        error = api.post(path, {**body, "prompt_logprobs": 21}, key).json()["error"]
        assert error["param"] == "prompt_logprobs"
    assert not fake_engine.requests
