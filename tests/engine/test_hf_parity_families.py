"""Qwen3 dense, Qwen3-MoE, EXAONE 4.0, Gemma 3 and Mistral with a sliding window: greedy tokens identical to
Hugging Face generate (CPU, fp32, small random-weight models saved by transformers with a real tokenizer),
also under chunked prefill and with prefix-cache hits and preemption. The windowed families slide over
fewer keys than the longer prompts hold, with windows that are not a multiple of the 8-token block."""
import pytest
import torch
from test_hf_parity import hf_greedy

from inference import LLM, SamplingParams

FAMILIES = {
    "qwen3": {"head_dim": 16},
    # 8 experts, 2 routed per token, renormalised; layer 1 keeps a dense MLP (mlp_only_layers).
    "qwen3_moe": {"head_dim": 16, "num_hidden_layers": 3, "num_experts": 8, "num_experts_per_tok": 2,
                  "moe_intermediate_size": 32, "norm_topk_prob": True, "mlp_only_layers": [1],
                  "decoder_sparse_step": 1},
    # Hybrid: layers 0-2 slide over 20 tokens with RoPE, layer 3 is global without it.
    "exaone4": {"num_hidden_layers": 4, "sliding_window": 20, "sliding_window_pattern": 4},
    # Sliding (16 tokens, RoPE base 1e4) and global (1e6) layers alternating; query_pre_attn_scalar != head_dim.
    "gemma3_text": {"head_dim": 16, "num_hidden_layers": 4, "sliding_window": 16, "sliding_window_pattern": 2,
                    "query_pre_attn_scalar": 8, "tie_word_embeddings": True},
    # Every layer slides over 13 tokens.
    "mistral": {"num_hidden_layers": 3, "sliding_window": 13},
}
WINDOWED = ["exaone4", "gemma3_text", "mistral"]
PROMPTS = [list(range(100, 100 + n)) for n in (3, 17, 40)]  # spans several 8-token blocks


@pytest.fixture(scope="module", params=list(FAMILIES))
def family_model(request, tmp_path_factory, tiny_model_factory):
    family = request.param
    path = tiny_model_factory(tmp_path_factory.mktemp(family), family, **FAMILIES[family])
    randomize_norms(path)
    return path, hf_greedy(path, PROMPTS, 20, [])


def randomize_norms(path):
    """transformers initialises every RMSNorm weight to ones: draw them, so that a norm loaded into
    the wrong place (or not applied, as q_norm and k_norm could be) changes the tokens."""
    from safetensors.torch import load_file, save_file

    f = str(path / "model.safetensors")
    state = load_file(f)
    g = torch.Generator().manual_seed(1)
    for name, t in state.items():
        if name.endswith("norm.weight"):
            state[name] = 1 + 0.5 * torch.randn(t.shape, generator=g)
    save_file(state, f, metadata={"format": "pt"})


def test_greedy_tokens_match_hf(family_model):
    path, expected = family_model
    llm = LLM(model=str(path), progress=False, device="cpu", block_size=8)
    outs = llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=20, ignore_eos=True))
    assert [o.outputs[0].token_ids for o in outs] == expected


def test_chunked_prefill_and_prefix_hits_match_hf(family_model):
    path, expected = family_model
    # 12 tokens a step: the 40-token prompt is prefilled in chunks, beside the others' decodes.
    llm = LLM(model=str(path), progress=False, device="cpu", block_size=8, max_num_batched_tokens=12,
              max_num_seqs=4)
    params = SamplingParams(temperature=0, max_tokens=20, ignore_eos=True)
    first = llm.generate(PROMPTS, params)
    assert [o.outputs[0].token_ids for o in first] == expected
    again = llm.generate([PROMPTS[2], PROMPTS[1]], params)  # their full blocks are cached now
    assert again[0].num_cached_tokens >= 32 and again[1].num_cached_tokens >= 16
    assert [o.outputs[0].token_ids for o in again] == [expected[2], expected[1]]


def test_preemption_matches_hf(family_model):
    """8 blocks of 8: the prompts are admitted together (1 + 3 + 3 blocks), then grow to 3 + 5 + 5
    blocks, so the newest are preempted and recomputed."""
    path, expected = family_model
    prompts = PROMPTS[:2] + [list(range(300, 320))]
    expected = expected[:2] + hf_greedy(path, prompts[2:], 20, [])
    llm = LLM(model=str(path), progress=False, device="cpu", block_size=8, num_kv_blocks=8,
              enable_prefix_caching=False)
    outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=20, ignore_eos=True))
    assert llm.engine.scheduler.num_preemptions > 0
    assert [o.outputs[0].token_ids for o in outs] == expected


def test_triton_kernels_match_hf(family_model, monkeypatch):
    """The same through the Triton kernels (the fused MoE one included): interpreted on CPU here."""
    from inference import ops

    path, expected = family_model
    if not torch.cuda.is_available():
        monkeypatch.setattr(ops, "TRITON_ON_CPU", True)
    llm = LLM(model=str(path), progress=False, device="cpu", block_size=8, max_num_batched_tokens=24)
    outs = llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=6, ignore_eos=True))
    assert [o.outputs[0].token_ids for o in outs] == [e[:6] for e in expected]


def test_windowed_layers_are_the_configs(family_model):
    """Which layers slide is read from the config: HF's layer_types (EXAONE 4.0, Gemma 3), every layer (Mistral)."""
    from inference.model_loader import load_hf_config
    from inference.models.args import ModelArgs

    path, _ = family_model
    cfg = load_hf_config(path)
    windows = ModelArgs.from_hf_config(cfg).layer_windows()
    window = FAMILIES[cfg.model_type].get("sliding_window")
    types = getattr(cfg, "layer_types", None) or ["full_attention"] * cfg.num_hidden_layers
    if cfg.model_type == "mistral":
        types = ["sliding_attention"] * cfg.num_hidden_layers
    assert windows == [window if t == "sliding_attention" and window else None for t in types]


@pytest.mark.parametrize("family", WINDOWED)
def test_context_is_not_capped_at_the_window(tmp_path, tiny_model_factory, family, monkeypatch):
    """The whole trained context is served (512 tokens here, the window is 13-20), and the windows
    matter: attending globally instead gives other tokens than Hugging Face's."""
    from inference.models.args import ModelArgs

    path = tiny_model_factory(tmp_path / family, family, **FAMILIES[family])
    randomize_norms(path)
    llm = LLM(model=str(path), progress=False, device="cpu", block_size=8)
    assert llm.engine.max_model_len == 512
    long_prompt = [100 + (i * 37) % 500 for i in range(300)]
    prompts = [long_prompt, PROMPTS[2]]
    params = SamplingParams(temperature=0, max_tokens=20, ignore_eos=True)
    expected = hf_greedy(path, prompts, 20, [])
    assert [o.outputs[0].token_ids for o in llm.generate(prompts, params)] == expected
    monkeypatch.setattr(ModelArgs, "layer_windows", lambda self: [None] * self.num_layers)
    unwindowed = LLM(model=str(path), progress=False, device="cpu", block_size=8)
    assert [o.outputs[0].token_ids for o in unwindowed.generate(prompts, params)] != expected
