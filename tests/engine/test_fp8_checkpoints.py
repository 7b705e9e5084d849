"""FP8 checkpoints (compressed-tensors per-tensor / per-channel, block-wise 128 x 128) load dequantized on
the CPU and give the same greedy tokens as their dequantized twin; bad scales and shapes are refused."""
import json
import shutil

import pytest
import torch

from inference import LLM, SamplingParams
from inference.errors import InvalidRequestError

from fp8_checkpoints import rewrite, write_fp8_pair

PROMPTS = ["Once upon a time", "The capital of France is", "def fibonacci(n):"]
GREEDY = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True, logprobs=1)
# Odd sizes: the 128 x 128 block scales end in partial blocks (320 = 2.5 blocks, 192 = 1.5).
SHAPE = dict(hidden_size=192, intermediate_size=320, num_attention_heads=4, num_key_value_heads=2)


@pytest.fixture(scope="module")
def source(tmp_path_factory, tiny_model_factory):
    return tiny_model_factory(tmp_path_factory.mktemp("fp8-source"), "llama", **SHAPE)


def _greedy(path, **kw):
    llm = LLM(model=str(path), progress=False, device="cpu", num_kv_blocks=64, **kw)
    outs = llm.generate(PROMPTS, GREEDY)
    return [o.outputs[0].token_ids for o in outs], [o.outputs[0].logprobs for o in outs]


@pytest.mark.parametrize("layout", ["tensor", "channel", "block"])
def test_fp8_checkpoint_gives_the_dequantized_models_tokens(tmp_path, source, layout):
    fp8, plain = write_fp8_pair(source, tmp_path / "fp8", tmp_path / "plain", layout)
    fp8_tokens, fp8_logprobs = _greedy(fp8)
    plain_tokens, plain_logprobs = _greedy(plain)
    assert fp8_tokens == plain_tokens
    assert fp8_logprobs == plain_logprobs  # the same weights, bit for bit
    # and the checkpoint really is a quantized one: its weights are not the source's
    assert _greedy(source)[1] != fp8_logprobs


def test_fp8_checkpoint_with_fp8_quantization_runs(tmp_path, source):
    fp8, _ = write_fp8_pair(source, tmp_path / "fp8", tmp_path / "plain", "block")
    tokens, _ = _greedy(fp8, quantization="fp8")
    assert [len(t) for t in tokens] == [12, 12, 12]


def _bad(tmp_path, source, layout, edit):
    fp8, _ = write_fp8_pair(source, tmp_path / "fp8", tmp_path / "plain", layout)
    rewrite(fp8, edit)
    with pytest.raises(ValueError) as refused:  # InvalidRequestError, or the loader's shape check
        LLM(model=str(fp8), progress=False, device="cpu", num_kv_blocks=8)
    return str(refused.value)


NAME = "model.layers.0.mlp.gate_proj.weight"


@pytest.mark.parametrize("layout, edit, says", [
    ("channel", lambda s: s.__setitem__(NAME + "_scale", -s[NAME + "_scale"]), "finite and positive"),
    ("channel", lambda s: s[NAME + "_scale"].__setitem__(0, float("nan")), "finite and positive"),
    ("block", lambda s: s.__setitem__(NAME + "_scale_inv", torch.zeros(3, 2)), "finite and positive"),
    ("channel", lambda s: s.__setitem__(NAME + "_scale", s[NAME + "_scale"][:-1]), "expected (320, 1)"),
    ("block", lambda s: s.__setitem__(NAME + "_scale_inv", torch.ones(2, 2)), "expected (3, 2)"),
    ("tensor", lambda s: s.pop(NAME + "_scale"), "has no weight_scale"),
    ("block", lambda s: s.__setitem__("model.layers.0.mlp.extra.weight_scale_inv", torch.ones(1, 1)),
     "belongs to no FP8 weight"),
    ("tensor", lambda s: s.__setitem__(NAME, s[NAME].float().to(torch.float8_e5m2)), "float8_e5m2"),
    ("channel", lambda s: s.__setitem__(NAME, s[NAME][:, :-16].contiguous()), "shape"),
])
def test_bad_fp8_checkpoints_are_refused(tmp_path, source, layout, edit, says):
    assert says in _bad(tmp_path, source, layout, edit)


@pytest.mark.parametrize("qcfg, says", [
    ({"quant_method": "awq", "bits": 4}, "'awq' is not supported"),
    ({"quant_method": "gptq", "bits": 4}, "compressed-tensors, fp8"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int",
                                                                                 "strategy": "group"}}}},
     "only 8-bit float"),
    ({"quant_method": "fp8", "weight_block_size": [128]}, "weight_block_size"),
])
def test_other_quantized_checkpoints_are_refused_naming_what_is_supported(tmp_path, source, qcfg, says):
    folder = tmp_path / "other"
    shutil.copytree(source, folder)
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"] = qcfg
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(InvalidRequestError) as refused:
        LLM(model=str(folder), progress=False, device="cpu", num_kv_blocks=8)
    assert says in str(refused.value)
