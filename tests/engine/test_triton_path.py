"""The engine through the Triton kernels (interpreted on CPU here, compiled on a GPU): same tokens as
through the torch references, for prefill, prefix hits, mixed batches and decode."""
from inference import LLM, SamplingParams, ops


def _route_to_triton(monkeypatch):
    """From here on the engine runs the Triton kernels: interpreted on CPU, compiled with CUDA."""
    import torch

    if not torch.cuda.is_available():
        monkeypatch.setattr(ops, "TRITON_ON_CPU", True)


def _generate_twice(model_path, prompts, params, **config):
    """Greedy tokens of two waves of the same prompts through one LLM (the second hits the cache)."""
    llm = LLM(model=str(model_path), progress=False, device="cpu", block_size=8,
              max_num_batched_tokens=40, **config)  # small budget: chunked prefill mixed with decodes
    if config.get("kv_cache_dtype") == "fp8":
        runner = llm.engine.runner
        runner.kv_scales[:, 0], runner.kv_scales[:, 1] = 0.25, 4.0  # scales != 1, as calibrated ones would be
    first = [o.outputs[0].token_ids for o in llm.generate(prompts, params)]
    second = [o.outputs[0].token_ids for o in llm.generate(prompts, params)]
    assert llm.engine.block_manager.num_hit_tokens > 0
    return first, second


def test_triton_kernels_give_the_reference_tokens(tiny_llama_path, monkeypatch):
    system = list(range(700, 724))  # 3 blocks of 8: the second wave hits the cache
    prompts = [system + list(range(800 + 7 * i, 805 + 7 * i)) for i in range(3)] + [[5, 6, 7]]
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)

    reference = _generate_twice(tiny_llama_path, prompts, params)
    _route_to_triton(monkeypatch)
    assert _generate_twice(tiny_llama_path, prompts, params) == reference


def test_fp8_kv_cache_through_the_kernels_gives_the_reference_tokens(tiny_llama_path, monkeypatch):
    """An e4m3 KV cache with scales != 1: written by the fused rotate-and-write kernel and read by the
    decode and prefill kernels, the same tokens as the torch path over the same e4m3 cache."""
    system = list(range(700, 724))
    prompts = [system + list(range(800 + 7 * i, 805 + 7 * i)) for i in range(3)] + [[5, 6, 7]]
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)

    reference = _generate_twice(tiny_llama_path, prompts, params, kv_cache_dtype="fp8")
    _route_to_triton(monkeypatch)
    assert _generate_twice(tiny_llama_path, prompts, params, kv_cache_dtype="fp8") == reference


def test_split_kv_prefill_gives_the_reference_tokens(tiny_llama_path, monkeypatch):
    """Prefix hits and chunks routed to the split-KV prefill kernel (thresholds lowered so that the tiny
    model's short contexts split) give the reference tokens."""
    import importlib

    import kernels

    prefill = importlib.import_module("kernels.paged_attention_prefill_split")  # the module, not the function

    system = list(range(700, 733))  # 33 tokens: the second wave's prefix hits are long against its queries
    prompts = [system + list(range(800 + 7 * i, 803 + 7 * i)) for i in range(3)]
    params = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)

    reference = _generate_twice(tiny_llama_path, prompts, params)
    _route_to_triton(monkeypatch)
    monkeypatch.setattr(prefill, "SPLIT_MIN_KEYS", 8)
    monkeypatch.setattr(prefill, "SPLIT_PROGRAMS_PER_SM", 256)  # CPU: 4 stand-in SMs
    splits = []
    real_split = kernels.paged_attention_prefill_split

    def counting_split(*args, **kwargs):
        splits.append(args[8])
        return real_split(*args, **kwargs)

    monkeypatch.setattr(kernels, "paged_attention_prefill_split", counting_split)
    assert _generate_twice(tiny_llama_path, prompts, params) == reference
    assert splits and max(splits) > 1, "no prefill step took the split-KV path"
