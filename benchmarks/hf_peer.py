"""The peer: Hugging Face transformers on the same model and prompts, in the same process."""
from __future__ import annotations

import time

import torch

from .workload import Run


def hf_generate(model, name: str, prompts: list[list[int]], output_len: int, pad_id: int,
                sync=None) -> Run:
    """Static batch `generate`: all prompts left-padded into one batch, greedy, exactly output_len tokens."""
    device = next(model.parameters()).device
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    ids, mask = ids.to(device), mask.to(device)
    kwargs = dict(do_sample=False, pad_token_id=pad_id, eos_token_id=None)
    with torch.inference_mode():
        t0 = time.perf_counter()
        model.generate(ids, attention_mask=mask, max_new_tokens=1, min_new_tokens=1, **kwargs)
        if sync:
            sync()
        ttft = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = model.generate(ids, attention_mask=mask, max_new_tokens=output_len, min_new_tokens=output_len,
                             **kwargs)
        if sync:
            sync()
        seconds = time.perf_counter() - t0
    n_out = (out.shape[1] - width) * len(prompts)
    tpot = (seconds - ttft) / max(1, output_len - 1)
    return Run(name, len(prompts), n_out, seconds, ttft, ttft, tpot, 0.0, 0.0, 0)


def hf_generate_batch(model, name: str, prompts: list[list[int]], output_len: int, sync=None) -> Run | str:
    """transformers' own continuous batching (`generate_batch`), when this version has it."""
    from transformers import GenerationConfig

    if not hasattr(model, "generate_batch"):
        return "generate_batch is not in this transformers version"
    config = GenerationConfig(max_new_tokens=output_len, do_sample=False, eos_token_id=None)
    # No inference_mode here: its worker thread updates tensors made in this thread.
    with torch.no_grad():
        t0 = time.perf_counter()
        results = model.generate_batch(inputs=prompts, generation_config=config)
        if sync:
            sync()
        seconds = time.perf_counter() - t0
    if not results or not any(r.generated_tokens for r in results.values()):
        return "hf generate_batch produced no tokens (failed; see the log above)"
    n_out = sum(len(r.generated_tokens) for r in results.values())
    return Run(name, len(prompts), n_out, seconds, 0.0, 0.0, 0.0, 0.0, 0.0, 0)


def hf_greedy(model, prompt: list[int], output_len: int) -> list[int]:
    """HF's greedy continuation of one prompt, exactly output_len tokens (EOS ignored)."""
    device = next(model.parameters()).device
    with torch.inference_mode():
        out = model.generate(torch.tensor([prompt], device=device), max_new_tokens=output_len, do_sample=False,
                             eos_token_id=None, pad_token_id=0)
    return out[0, len(prompt):].tolist()


def identical_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens two sequences share."""
    same = 0
    for x, y in zip(a, b):
        if x != y:
            break
        same += 1
    return same
