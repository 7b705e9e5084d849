"""Which models load: the supported families run; anything else is refused with what is supported and
how to get a local folder, before any weight is read and without touching the network."""
import json

import pytest

from inference import LLM
from inference.errors import InvalidRequestError
from inference.model_loader import resolve_model_path
from inference.models import FAMILIES, ModelArgs


def test_hub_id_is_refused_with_how_to_download_it():
    with pytest.raises(InvalidRequestError) as refused:
        resolve_model_path("Qwen/Qwen3-8B")
    message = str(refused.value)
    assert "hub id" in message and "hf download Qwen/Qwen3-8B --local-dir" in message
    assert all(t in message for t in FAMILIES)  # says what is supported
    assert refused.value.field == "model"


def test_hub_id_through_the_offline_api_is_a_value_error():
    with pytest.raises(ValueError, match="never downloads weights"):
        LLM(model="google/gemma-3-12b-it", progress=False, device="cpu")


def test_unsupported_architecture_is_refused_before_loading(tmp_path, tiny_llama_path):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    for f in tiny_llama_path.iterdir():
        (folder / f.name).symlink_to(f)
    (folder / "config.json").unlink()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}))
    with pytest.raises(InvalidRequestError) as refused:
        LLM(model=str(folder), progress=False, device="cpu")
    message = str(refused.value)
    assert "unsupported model architecture 'gpt2' (GPT2LMHeadModel)" in message
    assert "qwen3" in message and "llama" in message


def test_remote_code_folder_is_refused_saying_its_code_is_never_run(tmp_path, tiny_llama_path):
    folder = tmp_path / "custom"
    folder.mkdir()
    (folder / "model.safetensors").symlink_to(tiny_llama_path / "model.safetensors")
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "exaone", "auto_map": {"AutoModelForCausalLM": "modeling_exaone.ExaoneForCausalLM"}}))
    with pytest.raises(InvalidRequestError, match="never runs"):
        resolve_model_path(str(folder))


def test_trust_remote_code_is_refused_naming_the_families(tiny_llama_path):
    with pytest.raises(ValueError) as refused:
        LLM(model=str(tiny_llama_path), progress=False, device="cpu", trust_remote_code=True)
    assert "trust_remote_code" in str(refused.value) and "qwen3" in str(refused.value)


def test_model_args_refuse_an_unknown_family():
    from transformers import GPT2Config

    with pytest.raises(InvalidRequestError, match="unsupported model architecture 'gpt2'"):
        ModelArgs.from_hf_config(GPT2Config())
