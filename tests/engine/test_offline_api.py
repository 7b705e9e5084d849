"""vLLM's offline API on a tiny random model: prompt dicts, chat options, token rules, min_tokens,
constructor options (each works or is a ValueError)."""
import pytest
import torch

from inference import LLM, RequestOutputKind, SamplingParams
from inference.errors import InvalidRequestError

GREEDY = dict(temperature=0, ignore_eos=True)


@pytest.fixture(scope="module")
def tiny(tiny_llama_path):
    return LLM(model=str(tiny_llama_path), progress=False, device="cpu")


def ids_of(outputs):
    return [o.outputs[0].token_ids for o in outputs]


# --- generate: vLLM's prompt forms ---
def test_prompt_dicts_match_text_and_token_ids(tiny):
    params = SamplingParams(max_tokens=5, **GREEDY)
    ids = tiny.get_tokenizer().encode("Hello there", add_special_tokens=True)
    by_text = tiny.generate(["Hello there"], params)
    by_dicts = tiny.generate([{"prompt": "Hello there"}, {"prompt_token_ids": ids}], params, use_tqdm=True)
    assert ids_of(by_dicts) == ids_of(by_text) * 2
    assert by_dicts[0].prompt == "Hello there" and by_dicts[1].prompt_token_ids == ids
    assert ids_of(tiny.generate({"prompt_token_ids": ids}, params)) == ids_of(by_text)
    for bad in ({"prompt": "a", "prompt_token_ids": [1]}, {"prompt": "a", "multi_modal_data": {}}, [True, 3]):
        with pytest.raises(ValueError):
            tiny.generate([bad], params)


def test_truncate_prompt_tokens_keeps_the_last_tokens(tiny):
    prompt = list(range(100, 140))
    cut = tiny.generate([prompt], SamplingParams(max_tokens=4, truncate_prompt_tokens=10, **GREEDY))[0]
    assert cut.prompt_token_ids == prompt[-10:]
    assert ids_of([cut]) == ids_of(tiny.generate([prompt[-10:]], SamplingParams(max_tokens=4, **GREEDY)))


# --- chat options ---
def test_chat_options_reach_the_template(tiny):
    tokenizer = tiny.get_tokenizer()
    conversation = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello, I"}]
    params = SamplingParams(max_tokens=3, **GREEDY)
    opened = tiny.chat(conversation[:1], params)[0]
    assert opened.prompt == tokenizer.apply_chat_template(conversation[:1], add_generation_prompt=True, tokenize=False)
    continued = tiny.chat(conversation, params, add_generation_prompt=False, continue_final_message=True)[0]
    assert continued.prompt.endswith("Hello, I")
    closed = tiny.chat(conversation[:1], params, add_generation_prompt=False)[0]
    assert not closed.prompt.endswith("assistant\n")
    custom = tiny.chat(conversation[:1], params, use_tqdm=True,
                       chat_template="{% for m in messages %}[{{ m.role }}|{{ m.content }}|{{ flavour }}]{% endfor %}"
                                     "{% if tools %}{{ tools[0].name }}{% endif %}",
                       chat_template_kwargs={"flavour": "x"}, tools=[{"name": "lookup"}])[0]
    assert custom.prompt == "[user|Hi|x]lookup"
    parts = tiny.chat([{"role": "user", "content": [{"type": "text", "text": "H"}, {"type": "text", "text": "i"}]}],
                      params)[0]
    assert parts.prompt == opened.prompt and ids_of([parts]) == ids_of([opened])
    with pytest.raises(ValueError):
        tiny.chat(conversation, params, continue_final_message=True)  # with add_generation_prompt


def test_a_chat_batch_script_runs_as_written_for_vllm(tiny):
    conversations = [
        [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Name a colour."}],
        [{"role": "user", "content": "Count to three."}, {"role": "assistant", "content": "One, two,"}],
    ]
    params = [SamplingParams(max_tokens=4, **GREEDY), SamplingParams(max_tokens=6, **GREEDY)]
    outputs = tiny.chat(conversations[:1], params[:1], use_tqdm=True, chat_template_kwargs={"enable_thinking": False})
    outputs += tiny.chat(conversations[1:], params[1:], add_generation_prompt=False, continue_final_message=True)
    for output, conversation, p in zip(outputs, conversations, params):
        assert len(output.outputs[0].token_ids) == p.max_tokens
        assert output.metrics.num_generation_tokens == p.max_tokens
    assert outputs[1].prompt.endswith("One, two,")
    both = tiny.chat(conversations[:1] * 2, params[0])  # one SamplingParams for the whole batch
    assert ids_of(both) == ids_of(outputs[:1]) * 2


# --- SamplingParams: token rules ---
def test_logit_bias_and_allowed_token_ids_steer_sampling(tiny):
    biased = tiny.generate(["Once"], SamplingParams(max_tokens=6, logit_bias={777: 100}, **GREEDY))[0]
    assert biased.outputs[0].token_ids == [777] * 6
    allowed = [11, 12, 13]
    sampled = tiny.generate(["Once"] * 4, SamplingParams(max_tokens=8, temperature=1.0, seed=3,
                                                         allowed_token_ids=allowed, ignore_eos=True))
    assert all(set(o.outputs[0].token_ids) <= set(allowed) for o in sampled)
    with pytest.raises(InvalidRequestError) as outside:
        tiny.generate(["Once"], SamplingParams(logit_bias={10 ** 6: 1.0}))
    assert outside.value.field == "logit_bias"


def test_bad_words_are_never_generated(tiny):
    params = SamplingParams(max_tokens=8, **GREEDY)
    plain = tiny.generate(["Once upon a time"], params)[0].outputs[0]
    first = tiny.get_tokenizer().decode(plain.token_ids[:1]).strip()
    banned = tiny.generate(["Once upon a time"], SamplingParams(max_tokens=8, bad_words=[first], **GREEDY))[0]
    words = tiny.get_tokenizer().convert_ids_to_tokens(banned.outputs[0].token_ids)
    assert plain.token_ids[0] not in banned.outputs[0].token_ids and len(words) == 8


def test_min_tokens_ignores_stop_strings_and_eos_until_reached(tiny):
    free = tiny.generate(["Once"], SamplingParams(max_tokens=12, **GREEDY))[0].outputs[0].text
    stop = free[2:4] if len(free) > 4 else free[-1]
    assert stop
    early = tiny.generate(["Once"], SamplingParams(max_tokens=12, temperature=0, ignore_eos=True, stop=[stop]))[0]
    held = tiny.generate(["Once"], SamplingParams(max_tokens=12, temperature=0, ignore_eos=True, stop=[stop],
                                                  min_tokens=8))[0].outputs[0]
    assert len(held.token_ids) >= 8 > len(early.outputs[0].token_ids)
    kept = tiny.generate(["Once"], SamplingParams(max_tokens=12, temperature=0, ignore_eos=True, stop=[stop],
                                                  include_stop_str_in_output=True))[0].outputs[0]
    assert kept.text == early.outputs[0].text + stop and kept.stop_reason == stop


def test_detokenize_false_returns_ids_only(tiny):
    out = tiny.generate(["Once"], SamplingParams(max_tokens=4, detokenize=False, **GREEDY))[0].outputs[0]
    assert out.text == "" and len(out.token_ids) == 4
    with pytest.raises(InvalidRequestError):
        SamplingParams(detokenize=False, stop=["."])


def test_sampling_params_refuse_bad_values():
    for kwargs, field in [(dict(seed=2 ** 64), "seed"), (dict(logit_bias={1: 101}), "logit_bias"),
                          (dict(allowed_token_ids=[-1]), "allowed_token_ids"), (dict(bad_words=[""]), "bad_words"),
                          (dict(truncate_prompt_tokens=0), "truncate_prompt_tokens"), (dict(output_kind=9), "output_kind"),
                          (dict(include_stop_str_in_output="yes"), "include_stop_str_in_output")]:
        with pytest.raises(InvalidRequestError) as refused:
            SamplingParams(**kwargs)
        assert refused.value.field == field
    assert SamplingParams(output_kind=RequestOutputKind.FINAL_ONLY).output_kind == RequestOutputKind.FINAL_ONLY
    assert SamplingParams(logit_bias={"5": 2}).logit_bias == {5: 2}


# --- the constructor ---
@pytest.mark.parametrize("kwargs", [dict(revision="main"), dict(quantization="awq"), dict(kv_cache_dtype="fp8_e5m2"),
                                    dict(tokenizer="other/tokenizer"), dict(dtype="int8"), dict(swap_space=4),
                                    dict(trust_remote_code=True)])
def test_unsupported_constructor_options_are_value_errors(tiny_llama_path, kwargs):
    with pytest.raises(ValueError) as refused:
        LLM(model=str(tiny_llama_path), progress=False, device="cpu", **kwargs)
    assert not isinstance(refused.value, TypeError) and str(refused.value)


@pytest.mark.parametrize("dtype, name", [("half", "float16"), (torch.float16, "float16"), ("float", "float32"),
                                         (torch.float32, "float32"), (torch.bfloat16, "bfloat16")])
def test_dtype_takes_vllm_names_and_torch_dtypes(tiny_llama_path, dtype, name):
    llm = LLM(model=str(tiny_llama_path), progress=False, device="cpu", dtype=dtype, num_kv_blocks=8,
              tokenizer=str(tiny_llama_path), trust_remote_code=False, kv_cache_dtype="auto")
    assert llm.engine.config.dtype == name
