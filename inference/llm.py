"""LLM: the offline API, as in vLLM — `LLM(model=...).generate(prompts, sampling_params)`.

A vLLM script runs with only its import changed: prompts may be text, token ids or vLLM's prompt
dicts ({"prompt": ...} / {"prompt_token_ids": [...]}); `chat` takes vLLM's template options; vLLM's
constructor options either work or raise a ValueError that says why (never a TypeError).
"""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import replace
from typing import Any, Iterator

from .config import EngineConfig
from .engine import LLMEngine
from .errors import InvalidRequestError
from .logprobs import as_vllm
from .outputs import CompletionOutput, RequestOutput, RequestStateStats, StreamDelta
from .sampling_params import SamplingParams

_ids = itertools.count()

# vLLM's dtype spellings -> EngineConfig's
_DTYPES = {"auto": "auto", "half": "float16", "float16": "float16", "bfloat16": "bfloat16", "float": "float32",
           "float32": "float32"}
_CONFIG_FIELDS = {f.name for f in dataclasses.fields(EngineConfig)}

Prompt = str | list[int] | dict[str, Any]


def _dtype_name(dtype: Any) -> str:
    """"half", "float16", torch.float16, ... -> EngineConfig's name. Raises ValueError for others."""
    name = str(dtype).removeprefix("torch.")
    if name not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)} or a torch dtype of those, got {dtype!r}")
    return _DTYPES[name]


def _check_vllm_options(model: str | None, tokenizer: str | None, revision: str | None,
                        trust_remote_code: bool) -> None:
    """vLLM's loading options: what Pagoda does the same way passes; the rest is a ValueError."""
    if tokenizer is not None and tokenizer != model:
        raise ValueError("tokenizer: the tokenizer is loaded from the model's folder; a separate one is not "
                         "supported (save it into the model folder)")
    if revision is not None:
        raise ValueError("revision: models are loaded from a local folder or a built-in name, not from a hub "
                         "revision (download that revision into a folder and pass its path)")
    if not isinstance(trust_remote_code, bool):
        raise ValueError("trust_remote_code must be True or False")
    if trust_remote_code:
        # Accepting it would promise what never happens: a folder's own Python is never run.
        from .models import supported_families

        raise ValueError("trust_remote_code=True: Pagoda never runs a model folder's own code; it runs its own "
                         f"code for these families: {supported_families()}. Drop the option (a folder of a "
                         "supported family loads without it)")


class LLM:
    """Loads a model once and generates for batches of prompts with continuous batching.

    `LLM()` takes the embedded default (SmolLM2-135M-Instruct); keyword arguments are EngineConfig fields,
    plus vLLM's `tokenizer`, `trust_remote_code`, `revision` (checked: they work as in vLLM or raise a
    ValueError). `quantization` ("fp8") and `kv_cache_dtype` ("auto", "fp8") are EngineConfig's.
    `dtype` takes vLLM's names ("half") and torch dtypes.
    """

    def __init__(self, model: str | None = None, progress: bool = True, *, tokenizer: str | None = None,
                 trust_remote_code: bool = False, revision: str | None = None, quantization: str | None = None,
                 kv_cache_dtype: str = "auto", **config):
        _check_vllm_options(model, tokenizer, revision, trust_remote_code)
        unknown = sorted(set(config) - _CONFIG_FIELDS)
        if unknown:
            raise ValueError(f"LLM() does not take {', '.join(unknown)}; it takes {', '.join(sorted(_CONFIG_FIELDS))} "
                             "and vLLM's tokenizer, trust_remote_code, revision")
        if model is not None:
            config["model"] = model
        # EngineConfig checks these two (an unsupported method is an InvalidRequestError, a ValueError).
        config.update(quantization=quantization, kv_cache_dtype=kv_cache_dtype)
        if "dtype" in config:
            config["dtype"] = _dtype_name(config["dtype"])
        self.engine = LLMEngine(EngineConfig(**config), progress=progress)
        self.tokenizer = self.engine.tokenizer

    def shutdown(self) -> None:
        """Stop a tensor-parallel engine's worker processes (nothing to do on one rank)."""
        self.engine.shutdown()

    def get_tokenizer(self):
        """The Hugging Face tokenizer the engine uses (as vLLM's LLM.get_tokenizer())."""
        return self.tokenizer

    def encode(self, prompt: str) -> list[int]:
        return self.tokenizer.encode(prompt, add_special_tokens=True)

    def _prompt(self, prompt: Prompt, index: int) -> tuple[str | None, list[int]]:
        """(text, token ids) of one prompt: text, token ids, or a vLLM prompt dict."""
        if isinstance(prompt, dict):
            extra = sorted(set(prompt) - {"prompt", "prompt_token_ids"})
            if extra:
                raise ValueError(f"prompts[{index}]: {', '.join(extra)} not supported (text-only model); "
                                 "a prompt dict takes 'prompt' or 'prompt_token_ids'")
            if ("prompt" in prompt) == ("prompt_token_ids" in prompt):
                raise ValueError(f"prompts[{index}]: give exactly one of 'prompt' and 'prompt_token_ids'")
            prompt = prompt.get("prompt", prompt.get("prompt_token_ids"))
        if isinstance(prompt, str):
            return prompt, self.encode(prompt)
        if isinstance(prompt, list) and not any(isinstance(t, bool) for t in prompt):
            return None, list(prompt)  # the engine checks they are token ids of its vocabulary
        raise InvalidRequestError(f"prompts[{index}] must be text, a list of token ids or a prompt dict, "
                                  f"got {prompt!r:.80}", field="prompt")

    def generate(self, prompts: Prompt | list[Prompt],
                 sampling_params: SamplingParams | list[SamplingParams] | None = None,
                 tenant: str | None = None, use_tqdm: bool = False) -> list[RequestOutput]:
        """Generate for every prompt (text, token ids, or {"prompt": ...} / {"prompt_token_ids": [...]})
        and return outputs in the prompts' order. `use_tqdm` shows a progress bar of finished prompts."""
        if isinstance(prompts, (str, dict)) or (prompts and isinstance(prompts[0], int)):
            prompts = [prompts]  # type: ignore[list-item]
        parsed = [self._prompt(p, i) for i, p in enumerate(prompts)]
        params_list = self._params_list(sampling_params, len(parsed))
        return self._run([(text, ids, params) for (text, ids), params in zip(parsed, params_list)], tenant,
                         use_tqdm)

    def chat(self, messages: list[dict] | list[list[dict]],
             sampling_params: SamplingParams | list[SamplingParams] | None = None,
             tenant: str | None = None, use_tqdm: bool = False, *, chat_template: str | None = None,
             add_generation_prompt: bool = True, continue_final_message: bool = False,
             chat_template_kwargs: dict[str, Any] | None = None,
             tools: list[dict] | None = None) -> list[RequestOutput]:
        """Render each conversation with the model's chat template (or `chat_template`), then generate.

        As vLLM: `add_generation_prompt` opens the assistant's turn; `continue_final_message` leaves the
        last (assistant) message open to be continued instead (not both); `tools` and
        `chat_template_kwargs` are passed to the template. Content may be a list of text parts.
        """
        if add_generation_prompt and continue_final_message:
            raise ValueError("add_generation_prompt and continue_final_message cannot both be True")
        conversations = [messages] if messages and isinstance(messages[0], dict) else messages
        prompts = [self.tokenizer.apply_chat_template(
            [_text_message(m) for m in conversation], tools=tools, chat_template=chat_template,
            add_generation_prompt=add_generation_prompt, continue_final_message=continue_final_message,
            tokenize=False, **(chat_template_kwargs or {})) for conversation in conversations]
        ids = [self.tokenizer.encode(p, add_special_tokens=False) for p in prompts]
        params_list = self._params_list(sampling_params, len(ids))
        return self._run(list(zip(prompts, ids, params_list)), tenant, use_tqdm)

    @staticmethod
    def _params_list(sampling_params, num_prompts: int) -> list[SamplingParams]:
        params_list = (sampling_params if isinstance(sampling_params, list)
                       else [sampling_params or SamplingParams()] * num_prompts)
        if len(params_list) != num_prompts:
            raise ValueError("sampling_params must be one SamplingParams or one per prompt")
        return params_list

    def _run(self, requests: list[tuple[str | None, list[int], SamplingParams]],
             tenant: str | None, use_tqdm: bool = False) -> list[RequestOutput]:
        engine = self.engine
        requests = [(text, params.truncate_prompt(ids), params) for text, ids, params in requests]
        validated = [engine.validate(ids, params) for _, ids, params in requests]  # all before starting any
        started: list[tuple[str, list[str]]] = []
        bar = None
        try:
            for (text, ids, params), checked in zip(requests, validated):
                rid = f"offline-{next(_ids)}"
                sub_ids = []
                for i in range(params.n):
                    # The prompt is the same for every choice: only the first computes its logprobs.
                    p = params if params.n == 1 else replace(
                        params, n=1, seed=None if params.seed is None else params.seed + i,
                        prompt_logprobs=params.prompt_logprobs if i == 0 else None)
                    engine.add_request(f"{rid}.{i}", ids, p, tenant, text, validated=checked)
                    sub_ids.append(f"{rid}.{i}")
                started.append((rid, sub_ids))
            if use_tqdm:
                from tqdm.auto import tqdm

                bar = tqdm(total=sum(len(subs) for _, subs in started), desc="Processed prompts", unit="seq")
            finished: dict[str, list[StreamDelta]] = {}
            texts: dict[str, list[str]] = {}
            while engine.has_unfinished():
                for d in engine.step():
                    texts.setdefault(d.request_id, []).append(d.text)
                    finished.setdefault(d.request_id, []).append(d)
                    if bar is not None and d.finished:
                        bar.update(1)
        except BaseException:
            for _, subs in started:
                for sub in subs:
                    engine.abort(sub)
            raise
        finally:
            if bar is not None:
                bar.close()
        outputs = []
        for (rid, subs), (text, ids, params) in zip(started, requests):
            decode = self._decoder() if params.detokenize else None
            comps = []
            for i, sub in enumerate(subs):
                deltas = finished[sub]
                last = deltas[-1]
                token_ids = [t for d in deltas for t in d.token_ids]
                logprobs = [lp for d in deltas for lp in (d.logprobs or [])] or None
                comps.append(CompletionOutput(
                    index=i, text="".join(texts[sub]), token_ids=token_ids,
                    finish_reason=last.finish_reason, stop_reason=last.stop_reason,
                    logprobs=as_vllm(logprobs, decode) if logprobs else None,
                    cumulative_logprob=(sum(lp[t] for lp, t in zip(logprobs, token_ids))
                                        if logprobs else None)))
            first = finished[subs[0]]
            prompt_logprobs = first[0].prompt_logprobs
            outputs.append(RequestOutput(
                rid, text, ids, comps, num_cached_tokens=first[-1].num_cached_tokens,
                prompt_logprobs=as_vllm(prompt_logprobs, decode) if prompt_logprobs is not None else None,
                metrics=_metrics(first, len(comps[0].token_ids))))
        return outputs

    def _decoder(self):
        """token id -> its text, each id decoded once per call (as vLLM's Logprob.decoded_token)."""
        cache: dict[int, str] = {}

        def decode(token_id: int) -> str:
            if token_id not in cache:
                cache[token_id] = self.tokenizer.decode([token_id])
            return cache[token_id]

        return decode

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


def _metrics(deltas: list[StreamDelta], num_generation_tokens: int) -> RequestStateStats:
    """A request's timings from its deltas (the engine puts them on the first and the last)."""
    m: dict = {}
    for d in (deltas[0], deltas[-1]):
        m.update({k: v for k, v in d.metrics.items() if v is not None})
    arrival, first_token = m.get("arrival"), m.get("first_token")
    return RequestStateStats(
        num_generation_tokens=num_generation_tokens, arrival_time=arrival, queued_ts=arrival,
        scheduled_ts=m.get("first_scheduled"), first_token_ts=first_token, last_token_ts=m.get("last_token"),
        finished_ts=m.get("finished"), num_preemptions=m.get("num_preemptions", 0),
        first_token_latency=None if first_token is None or arrival is None else first_token - arrival)


def _text_message(message: dict) -> dict:
    """A chat message whose content is a list of text parts, as one string (chat templates expect text)."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    texts = []
    for part in content:
        if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
            raise ValueError(f"only text content parts are supported, got {part!r:.80}")
        texts.append(part["text"])
    return {**message, "content": "".join(texts)}
