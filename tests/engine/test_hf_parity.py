"""Greedy output is token-for-token identical to Hugging Face transformers' own generate."""
import pytest
import torch

from inference import LLM, SamplingParams

PROMPTS = [
    "Hello, my name is",
    "The capital of France is",
    "ㅎㅇ? 넌 누구야?",
    "Write a short poem about the sea, the wind, the sky and the long road home, in the style of",
]


def hf_greedy(path, prompt_ids, max_new_tokens, eos_ids):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    outs = []
    for ids in prompt_ids:
        g = model.generate(torch.tensor([ids]), max_new_tokens=max_new_tokens, do_sample=False,
                           eos_token_id=eos_ids, pad_token_id=eos_ids[0] if eos_ids else 0)
        outs.append(g[0, len(ids):].tolist())
    return outs


def test_default_model_matches_hf_on_a_mixed_batch(smol, smol_path):
    params = SamplingParams(temperature=0, max_tokens=24)
    outputs = smol.generate(PROMPTS, params)  # different prompt lengths, run together
    ids = [smol.encode(p) for p in PROMPTS]
    expected = hf_greedy(smol_path, ids, 24, smol.engine.eos_token_ids)
    for out, want in zip(outputs, expected):
        assert out.outputs[0].token_ids == want
        assert out.outputs[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize("family,overrides", [
    ("llama", {}),
    ("qwen2", {}),  # q/k/v projections with bias
    ("mistral", {"sliding_window": None}),
    ("llama", {"num_key_value_heads": 4, "tie_word_embeddings": True}),
])
def test_random_safetensors_models_match_hf(tmp_path, tiny_model_factory, family, overrides):
    path = tiny_model_factory(tmp_path / family, family, **overrides)
    llm = LLM(model=str(path), progress=False, device="cpu", block_size=8)
    prompts = [list(range(100, 100 + n)) for n in (3, 17, 40)]  # spans several 8-token blocks
    outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=20, ignore_eos=True))
    expected = hf_greedy(path, prompts, 20, [])
    assert [o.outputs[0].token_ids for o in outs] == expected
