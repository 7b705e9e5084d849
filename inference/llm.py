"""LLM: the offline API, as in vLLM — `LLM(model=...).generate(prompts, sampling_params)`."""
from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Iterator

from .config import EngineConfig
from .engine import LLMEngine
from .outputs import CompletionOutput, RequestOutput, StreamDelta
from .sampling_params import SamplingParams

_ids = itertools.count()


class LLM:
    """Loads a model once and generates for batches of prompts with continuous batching.

    `LLM()` takes the embedded default (SmolLM2-135M-Instruct); keyword arguments are EngineConfig fields.
    """

    def __init__(self, model: str | None = None, progress: bool = True, **config):
        if model is not None:
            config["model"] = model
        self.engine = LLMEngine(EngineConfig(**config), progress=progress)
        self.tokenizer = self.engine.tokenizer

    def shutdown(self) -> None:
        """Stop a tensor-parallel engine's worker processes (nothing to do on one rank)."""
        self.engine.shutdown()

    def get_tokenizer(self):
        return self.tokenizer

    def encode(self, prompt: str) -> list[int]:
        return self.tokenizer.encode(prompt, add_special_tokens=True)

    def generate(self, prompts: str | list[str] | list[list[int]],
                 sampling_params: SamplingParams | list[SamplingParams] | None = None,
                 tenant: str | None = None, use_tqdm: bool = False) -> list[RequestOutput]:
        """Generate for every prompt (text, or token ids) and return outputs in the prompts' order."""
        if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
            prompts = [prompts]  # type: ignore[list-item]
        params_list = (sampling_params if isinstance(sampling_params, list)
                       else [sampling_params or SamplingParams()] * len(prompts))
        if len(params_list) != len(prompts):
            raise ValueError("sampling_params must be one SamplingParams or one per prompt")
        requests = []
        for prompt, params in zip(prompts, params_list):
            text = prompt if isinstance(prompt, str) else None
            ids = self.encode(prompt) if isinstance(prompt, str) else list(prompt)
            requests.append((text, ids, params))
        return self._run(requests, tenant)

    def chat(self, messages: list[dict] | list[list[dict]],
             sampling_params: SamplingParams | list[SamplingParams] | None = None,
             tenant: str | None = None) -> list[RequestOutput]:
        """Apply the model's chat template to each conversation, then generate."""
        conversations = [messages] if messages and isinstance(messages[0], dict) else messages
        prompts = [self.tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=False)
                   for c in conversations]
        ids = [self.tokenizer.encode(p, add_special_tokens=False) for p in prompts]
        params_list = (sampling_params if isinstance(sampling_params, list)
                       else [sampling_params or SamplingParams()] * len(ids))
        return self._run(list(zip(prompts, ids, params_list)), tenant)

    def _run(self, requests: list[tuple[str | None, list[int], SamplingParams]],
             tenant: str | None) -> list[RequestOutput]:
        engine = self.engine
        validated = [engine.validate(ids, params) for _, ids, params in requests]  # all before starting any
        started: list[tuple[str, list[str]]] = []
        try:
            for (text, ids, params), checked in zip(requests, validated):
                rid = f"offline-{next(_ids)}"
                sub_ids = []
                for i in range(params.n):
                    p = params if params.n == 1 else replace(
                        params, n=1, seed=None if params.seed is None else params.seed + i)
                    engine.add_request(f"{rid}.{i}", ids, p, tenant, text, validated=checked)
                    sub_ids.append(f"{rid}.{i}")
                started.append((rid, sub_ids))
            finished: dict[str, list[StreamDelta]] = {}
            texts: dict[str, list[str]] = {}
            while engine.has_unfinished():
                for d in engine.step():
                    texts.setdefault(d.request_id, []).append(d.text)
                    finished.setdefault(d.request_id, []).append(d)
        except BaseException:
            for _, subs in started:
                for sub in subs:
                    engine.abort(sub)
            raise
        outputs = []
        for (rid, subs), (text, ids, _) in zip(started, requests):
            comps = []
            for i, sub in enumerate(subs):
                deltas = finished[sub]
                last = deltas[-1]
                token_ids = [t for d in deltas for t in d.token_ids]
                logprobs = [lp for d in deltas for lp in (d.logprobs or [])] or None
                comps.append(CompletionOutput(
                    index=i, text="".join(texts[sub]), token_ids=token_ids,
                    finish_reason=last.finish_reason, stop_reason=last.stop_reason, logprobs=logprobs,
                    cumulative_logprob=(sum(lp[t] for lp, t in zip(logprobs, token_ids))
                                        if logprobs else None)))
            outputs.append(RequestOutput(rid, text, ids, comps, num_cached_tokens=finished[subs[0]][-1]
                                         .num_cached_tokens))
        return outputs

    def stream(self, prompt: str, params: SamplingParams | None = None,
               add_special_tokens: bool = True) -> Iterator[str]:
        """Yield the text of one request as it is generated (the CLI uses this)."""
        engine = self.engine
        rid = f"stream-{next(_ids)}"
        ids = self.tokenizer.encode(prompt, add_special_tokens=add_special_tokens)
        engine.add_request(rid, ids, params or SamplingParams(), None, prompt)
        try:
            while engine.has_unfinished():
                for d in engine.step():
                    if d.request_id == rid:
                        if d.text:
                            yield d.text
                        if d.finished:
                            return
        finally:
            engine.abort(rid)
