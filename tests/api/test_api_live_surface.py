"""The rest of the OpenAI / vLLM surface and bad input, against the live server (see api_live_server.py):
what only the real server can show (header limits, the WebSocket handshake, the engine's vocabulary)
and what the real clients see (n choices, logit_bias, /tokenize)."""
import asyncio
import time

import httpx
import openai
import pytest
import websockets
from websockets.exceptions import InvalidStatus
from transformers import AutoTokenizer

CHAT = [{"role": "user", "content": "Hello!"}]


@pytest.fixture
def client(live):
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key=live.key("acme"), max_retries=0, timeout=60)


@pytest.fixture
def auth(live):
    return {"Authorization": f"Bearer {live.key('acme')}"}


def _error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


def _usage_row(live, request_id: str) -> dict:
    for _ in range(50):
        row = live.db.row("SELECT * FROM tenants_apiusage WHERE request_id = %s", (request_id,))
        if row is not None:
            return row
        time.sleep(0.1)
    raise AssertionError(f"no usage row for {request_id}")


# --- bad input: a clear 4xx, never a 5xx ---
@pytest.mark.parametrize("size", [20_000, 200_000, 2_000_000])
def test_oversized_authorization_header_is_a_json_431(live, size):
    response = httpx.post(f"{live.url}/v1/chat/completions", json={"model": "terse", "messages": CHAT},
                          headers={"Authorization": "Bearer " + "k" * size}, timeout=30)
    assert _error(response, 431)["code"] == "request_header_too_large"


def test_websocket_to_an_unknown_path_is_refused_at_the_handshake(live):
    async def connect(path: str):
        async with websockets.connect(f"{live.url.replace('http', 'ws')}{path}", open_timeout=10):
            pass

    for path in ("/ws/chat/abc/", "/ws/nowhere/"):
        with pytest.raises(InvalidStatus) as refused:
            asyncio.run(connect(path))
        assert refused.value.response.status_code == 403
    assert "Traceback" not in live.log_tail(20_000)


def test_seed_outside_64_bits_is_400_before_the_engine(live, client):
    computed = live.engine_stats()["stats"]["prompt_tokens_total"]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="terse", messages=CHAT, seed=2 ** 64, max_tokens=2)
    assert refused.value.param == "seed"
    assert live.engine_stats()["stats"]["prompt_tokens_total"] == computed  # nothing reached the engine


def test_nul_in_model_is_400_and_its_usage_row_is_kept(live, auth):
    response = httpx.post(f"{live.url}/v1/chat/completions", headers=auth, timeout=30,
                          json={"model": "ter\u0000se", "messages": CHAT})
    error = _error(response, 400)
    assert error["param"] == "model" and "retry-after" not in response.headers
    rows = live.db.rows("SELECT model, status_code FROM tenants_apiusage WHERE model = %s", ("ter\ufffdse",))
    assert rows == [{"model": "ter\ufffdse", "status_code": 400}]


def test_wrong_method_is_a_json_405(live, auth):
    for method in ("GET", "PUT", "DELETE"):
        response = httpx.request(method, f"{live.url}/v1/chat/completions", headers=auth, timeout=10)
        assert _error(response, 405)["code"] == "method_not_allowed" and response.headers["allow"] == "POST"


def test_a_huge_body_is_refused_by_its_length_at_once(live, auth):
    started = time.monotonic()
    response = httpx.post(f"{live.url}/v1/completions", headers=auth, timeout=60,
                          json={"model": "terse", "prompt": "word " * 480_000})  # 2.4 MB
    assert _error(response, 400)["code"] == "context_length_exceeded"
    assert time.monotonic() - started < 5  # not tokenized (that took 23 s)


# --- the rest of the surface ---
def test_n_choices_with_a_seed(live, client):
    request = dict(model="chat", messages=CHAT, n=3, max_tokens=4, temperature=1.0, seed=7,
                   extra_body={"ignore_eos": True})
    first = client.chat.completions.create(**request)
    assert [c.index for c in first.choices] == [0, 1, 2]
    assert len({c.message.content for c in first.choices}) > 1  # distinct seeds, distinct samples
    assert first.usage.completion_tokens == 12
    again = client.chat.completions.create(**request)
    assert [c.message.content for c in again.choices] == [c.message.content for c in first.choices]
    chunks = list(client.chat.completions.create(**request, stream=True))
    texts = {i: "".join(c.choices[0].delta.content or "" for c in chunks if c.choices[0].index == i) for i in range(3)}
    assert [texts[i] for i in range(3)] == [c.message.content for c in first.choices]
    finishes = [(c.choices[0].index, c.choices[0].finish_reason) for c in chunks if c.choices[0].finish_reason]
    assert sorted(finishes) == [(0, "length"), (1, "length"), (2, "length")]
    row = _usage_row(live, first.id)
    assert row["num_output_tokens"] == 12 and live.engine_stats()["stats"]["num_running"] == 0

    completion = client.completions.create(model="chat", prompt="Once", n=2, max_tokens=3, seed=1,
                                           extra_body={"ignore_eos": True})
    assert [c.index for c in completion.choices] == [0, 1] and completion.usage.completion_tokens == 6


def test_logit_bias_steers_the_tokens(live, client, tiny_llama_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_path)
    token = tokenizer.encode(" banana", add_special_tokens=False)[0]
    response = client.completions.create(model="terse", prompt="Once", max_tokens=3, logprobs=0,
                                         logit_bias={str(token): 100}, extra_body={"ignore_eos": True})
    assert response.choices[0].text == tokenizer.decode([token] * 3)
    with pytest.raises(openai.BadRequestError) as outside:
        client.completions.create(model="terse", prompt="Once", max_tokens=1, logit_bias={"49152": 1})
    assert outside.value.param == "logit_bias"


def test_tokenize_and_detokenize(live, auth, client, tiny_llama_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_path)
    for base in (live.url, f"{live.url}/v1"):
        chat = httpx.post(f"{base}/tokenize", headers=auth, json={"model": "terse", "messages": CHAT}, timeout=30)
        assert chat.status_code == 200, chat.text
        served = client.chat.completions.create(model="terse", messages=CHAT, max_tokens=1)
        assert chat.json()["count"] == served.usage.prompt_tokens == len(chat.json()["tokens"])
        assert chat.json()["max_model_len"] == 512
        ids = tokenizer.encode("Hello world", add_special_tokens=False)
        text = httpx.post(f"{base}/detokenize", headers=auth, json={"tokens": ids}, timeout=30)
        assert text.json() == {"prompt": "Hello world"}
        bad = httpx.post(f"{base}/detokenize", headers=auth, json={"tokens": [1, 10 ** 9]}, timeout=30)
        assert _error(bad, 400)["param"] == "tokens[1]"
        assert httpx.post(f"{base}/tokenize", json={"prompt": "x"}, timeout=30).status_code == 401


def test_content_as_text_parts_and_echo(live, client):
    parts = [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo!"}]
    as_parts = client.chat.completions.create(
        model="terse", max_tokens=3,
        messages=[{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                  {"role": "user", "content": parts}])
    as_text = client.chat.completions.create(
        model="terse", max_tokens=3, messages=[{"role": "system", "content": "Be brief."},
                                               {"role": "user", "content": "Hello!"}])
    assert as_parts.choices[0].message.content == as_text.choices[0].message.content
    assert as_parts.usage.prompt_tokens == as_text.usage.prompt_tokens
    echoed = client.completions.create(model="terse", prompt="Once upon", max_tokens=2, echo=True)
    plain = client.completions.create(model="terse", prompt="Once upon", max_tokens=2)
    assert echoed.choices[0].text == "Once upon" + plain.choices[0].text


def test_echo_with_logprobs_scores_the_prompt_as_transformers_does(live, auth, client, tiny_llama_path):
    import torch
    from transformers import AutoModelForCausalLM

    # OpenAI's scoring call, as lm-eval-harness makes it: echo, logprobs, nothing generated.
    text = "Once upon a time, a small dragon"
    scored = client.completions.create(model="terse", prompt=text, max_tokens=0, echo=True, logprobs=2)
    choice = scored.choices[0]
    assert choice.text == text
    ids = httpx.post(f"{live.url}/tokenize", headers=auth, json={"model": "terse", "prompt": text},
                     timeout=30).json()["tokens"]  # acme's system turn, then the text
    num_shown = len(choice.logprobs.tokens)
    assert scored.usage.prompt_tokens == len(ids) > num_shown and scored.usage.prompt_tokens_details.cached_tokens == 0
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_path, dtype=torch.float32)
    with torch.no_grad():
        logp = model(torch.tensor([ids])).logits[0].float().log_softmax(dim=-1)
    # Token j is scored by the logits at j - 1; the text's first token follows the system turn.
    expected = [float(logp[j - 1, ids[j]]) for j in range(len(ids) - num_shown, len(ids))]
    assert choice.logprobs.token_logprobs == pytest.approx(expected, abs=1e-4)
    assert all(1 <= len(top) <= 2 for top in choice.logprobs.top_logprobs)  # two tokens may share a text
