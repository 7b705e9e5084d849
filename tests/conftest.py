"""Shared fixtures: the embedded default model (loaded once per session) and tiny random models."""
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
try:  # Without a GPU, Triton kernels run in its interpreter; this must be set before `kernels` is imported.
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
        # Also the interpreter's NumPy >= 2.4 fix, for the engine tests that run kernels through it.
        sys.path.insert(0, str(Path(__file__).resolve().parent / "kernels"))
        from conftest_interpreter import patch_interpreter_for_numpy_2_4

        patch_interpreter_for_numpy_2_4()
except ImportError:
    pass


@pytest.fixture(scope="session")
def smol_path():
    from inference.model_loader import resolve_model_path

    return resolve_model_path("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def smol(smol_path):
    """The default SmolLM2-135M-Instruct behind the offline API (CPU, fp32)."""
    from inference import LLM

    return LLM(progress=False, device="cpu")


def save_tiny_model(folder, smol_path, family="llama", seed=0, **overrides):
    """A small random model of `family`, saved as a Hugging Face folder with SmolLM2's tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    base = dict(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=0.2,
                bos_token_id=1, eos_token_id=2)
    base.update(overrides)
    config = AutoConfig.for_model(family, **base)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config).to(torch.float32)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(smol_path).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_model_factory(smol_path):
    """save_tiny_model(folder, family, **config overrides) -> folder"""
    return lambda folder, family="llama", **kw: save_tiny_model(folder, smol_path, family, **kw)


@pytest.fixture(scope="session")
def tiny_llama_path(tmp_path_factory, smol_path):
    return save_tiny_model(tmp_path_factory.mktemp("tiny-llama"), smol_path, "llama")


@pytest.fixture(autouse=True)
def _empty_api_caches():
    """Every test starts with empty per-process caches (pagoda.ttl_cache): a rolled-back test's rows,
    whose ids the next test may reuse, must not be served from them."""
    cache = sys.modules.get("pagoda.ttl_cache")
    if cache is not None:
        cache.clear_all()
    yield
