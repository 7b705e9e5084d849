"""quantization="fp8": e4m3 projections with per-output-channel scales, made at load time."""
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from inference import LLM, EngineConfig, SamplingParams
from inference.errors import InvalidRequestError
from inference.quantization import Fp8Linear, quantize_per_channel
from inference.quantization.fp8 import FP8_DTYPE, dequantize_per_channel

from fp8_checkpoints import is_projection

PROMPTS = ["Once upon a time", "The capital of France is", "def fibonacci(n):"]
GREEDY = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True, logprobs=1)


def test_per_channel_quantization_is_within_e4m3_precision():
    torch.manual_seed(1)
    w = torch.randn(96, 80) * torch.logspace(-3, 1, 96)[:, None]  # rows of very different magnitudes
    q, scale = quantize_per_channel(w)
    assert q.dtype == FP8_DTYPE and scale.shape == (96,)
    err = (dequantize_per_channel(q, scale, torch.float32) - w).abs()
    # e4m3 keeps 3 mantissa bits: relative error <= 2^-4 in its normal range, and each row's own scale
    # puts the row's largest value at 448, so small rows lose nothing to the large ones.
    assert (err <= w.abs() * 2 ** -4 + scale[:, None] * 2 ** -9).all()


def test_fp8_linear_matches_linear_closely():
    torch.manual_seed(2)
    linear = torch.nn.Linear(128, 64, bias=True)
    fp8 = Fp8Linear.from_linear(linear)
    x = torch.randn(17, 128)
    cos = torch.nn.functional.cosine_similarity(fp8(x), linear(x), dim=-1)
    assert cos.min() > 0.999


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, tiny_model_factory):
    return tiny_model_factory(tmp_path_factory.mktemp("fp8-weights"), "llama", hidden_size=128,
                              intermediate_size=256)


def _greedy(path, **kw):
    llm = LLM(model=str(path), progress=False, device="cpu", num_kv_blocks=64, **kw)
    outs = llm.generate(PROMPTS, GREEDY)
    return llm, [o.outputs[0].token_ids for o in outs], [o.outputs[0].logprobs for o in outs]


def test_fp8_engine_runs_the_per_channel_dequantized_model(tmp_path, tiny):
    """The FP8 engine's tokens are those of the model whose weights are its e4m3 weights times their
    scales (the CPU path dequantizes; on CUDA _scaled_mm computes the same product)."""
    llm, tokens, logprobs = _greedy(tiny, quantization="fp8")
    layer = llm.engine.runner.model.layers[0]
    for name in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"):
        assert isinstance(getattr(layer, name), Fp8Linear) and getattr(layer, name).weight.dtype == FP8_DTYPE
    assert llm.engine.config.quantization == "fp8"

    twin = tmp_path / "twin"
    shutil.copytree(tiny, twin)
    state = load_file(str(tiny / "model.safetensors"))
    for name, w in state.items():
        if is_projection(name):
            state[name] = dequantize_per_channel(*quantize_per_channel(w), torch.float32)
    save_file(state, str(twin / "model.safetensors"))
    _, twin_tokens, twin_logprobs = _greedy(twin)
    assert tokens == twin_tokens
    # Merged q/k/v and gate/up rows keep their per-row scales: the same weights, so the same logprobs up to
    # the order of float sums (the twin's fp32 projections may run from oneDNN-packed weights on the CPU).
    for per_token, twin_per_token in zip(logprobs, twin_logprobs, strict=True):
        for step, twin_step in zip(per_token, twin_per_token, strict=True):
            assert step.keys() == twin_step.keys() and all(abs(step[t].logprob - twin_step[t].logprob) < 1e-4
                                                           for t in step)


@pytest.mark.parametrize("method", ["awq", "gptq", "bitsandbytes", "FP8", "int8"])
def test_other_quantization_methods_are_refused_naming_fp8(tiny, method):
    with pytest.raises(ValueError) as refused:
        LLM(model=str(tiny), progress=False, device="cpu", quantization=method)
    assert "fp8" in str(refused.value) and method in str(refused.value)
    with pytest.raises(InvalidRequestError) as refused:
        EngineConfig(quantization=method)
    assert refused.value.field == "quantization"


async def test_server_engine_config_runs_fp8_in_the_engine_process(tiny):
    """The server builds EngineConfig(**json.loads(PAGODA_ENGINE_CONFIG)) and runs the core in a child
    process (AsyncLLM): FP8 weights and KV there stream the offline engine's tokens."""
    from inference import AsyncLLM

    fields = json.loads('{"quantization": "fp8", "kv_cache_dtype": "fp8", "num_kv_blocks": 64}')
    offline = LLM(model=str(tiny), progress=False, device="cpu", **fields)
    prompt = offline.encode(PROMPTS[0])
    want = offline.generate([prompt], GREEDY)[0].outputs[0].token_ids
    engine = AsyncLLM(EngineConfig(model=str(tiny), device="cpu", **fields), progress=False)
    try:
        got = [t async for d in engine.generate("fp8", prompt, GREEDY) for t in d.token_ids]
    finally:
        engine.shutdown()
    assert got == want and len(got) == 12


def test_two_ranks_with_fp8_keep_the_all_reduce(tiny):
    """quantize_model_fp8 replaces o_proj and down_proj: tensor parallelism's all-reduce hooks go on the
    replacements (without them each rank would run on half-sums and its tokens would be noise)."""
    one = _greedy(tiny, quantization="fp8")[1]
    llm = LLM(model=str(tiny), progress=False, device="cpu", num_kv_blocks=64, quantization="fp8",
              tensor_parallel_size=2)
    try:
        two = [o.outputs[0].token_ids for o in llm.generate(PROMPTS, GREEDY)]
        layer = llm.engine.runner.local.model.layers[0]  # rank 0's shard
        for proj in (layer.o_proj, layer.down_proj):
            assert isinstance(proj, Fp8Linear) and proj._forward_hooks
    finally:
        llm.shutdown()
    # Row-parallel shards get their own per-channel scales, so greedy runs part on this random model's
    # near-ties after a few tokens; the first two agree.
    assert [t[:2] for t in two] == [t[:2] for t in one]
