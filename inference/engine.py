"""LLMEngine: the synchronous core. `step()` is schedule -> run -> postprocess (OutputProcessor) -> report.

Not thread-safe: the offline `LLM` drives it directly, and `AsyncLLM` from its one loop thread.
"""
from __future__ import annotations

import logging
import time
from array import array
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .block_manager import BlockManager, Pin
from .config import EngineConfig
from .errors import EngineDeadError, InvalidRequestError, PromptTooLongError, QueueFullError
from .grammar import Grammars
from .model_loader import load_hf_config, load_tokenizer, resolve_model_path
from .model_runner import ModelRunner
from .models import ModelArgs
from .output_processor import OutputProcessor, StepTrace
from .outputs import StreamDelta
from .sampling_params import SamplingParams
from .scheduler import Scheduler, SchedulerOutput
from .sequence import Sequence


log = logging.getLogger("inference")
_FAILED = object()  # a step result: this sequence's computation raised


def validate_request(prompt_token_ids: list[int], params: SamplingParams, vocab_size: int,
                     max_model_len: int, tokenizer: Any = None) -> array:
    """Raise InvalidRequestError for a bad request; returns the prompt as an int64 array. Binds the
    params' token rules to the vocabulary (logit_bias / allowed_token_ids checked, bad_words tokenized).

    A frontend calls this before anything is queued (AsyncLLM, in the server's process), so the
    engine core takes the array as checked.
    """
    if not prompt_token_ids:
        raise InvalidRequestError("the prompt is empty", field="prompt")
    # In C (a long prompt is checked on the critical path of its TTFT): array() takes ints only,
    # and numpy's min/max over its buffer are ~10x faster than Python's over the list.
    try:
        ids = array("q", prompt_token_ids)
    except (TypeError, OverflowError):
        ok = False
    else:
        view = np.frombuffer(ids, dtype=np.int64)
        ok = bool(view.min() >= 0 and view.max() < vocab_size)
    if not ok:
        raise InvalidRequestError(f"prompt token ids must be integers in [0, {vocab_size})", field="prompt")
    if any(t >= vocab_size for t in params.stop_token_ids):
        raise InvalidRequestError(f"stop_token_ids must be < {vocab_size}", field="stop_token_ids")
    params.bind_tokenizer(tokenizer, vocab_size)
    if len(prompt_token_ids) >= max_model_len:
        raise PromptTooLongError(
            f"the prompt has {len(prompt_token_ids)} tokens; the context holds {max_model_len} "
            "(prompt plus at least one generated token)", field="prompt")
    return ids


class LLMEngine:
    def __init__(self, config: EngineConfig | None = None, progress: bool = True,
                 model_args: ModelArgs | None = None, tokenizer: Any = None, weights: dict | None = None):
        """Load the model named by `config.model`; or, with `model_args`, a model of that shape with
        `weights` (Hugging Face-named tensors) or random weights."""
        self.config = config = config or EngineConfig()
        self.model_name = config.model
        path: Path | None = None
        if model_args is None:
            path = resolve_model_path(config.model)
            hf_config = load_hf_config(path)
            model_args = ModelArgs.from_hf_config(hf_config)
            loaded = load_tokenizer(path, hf_config)
            self.tokenizer, eos = loaded.tokenizer, loaded.eos_token_ids
        else:
            self.tokenizer, eos = tokenizer, ([tokenizer.eos_token_id] if tokenizer is not None else [])
        self.model_args = model_args
        self.eos_token_ids = eos
        max_len = config.max_model_len or model_args.max_position_embeddings
        source = path if weights is None else weights
        if config.tensor_parallel_size > 1:  # validates the split before it starts the worker processes
            from .distributed.runner import TensorParallelRunner

            self.runner = TensorParallelRunner(config, model_args, source, eos, max_len, progress)
        else:
            self.runner = ModelRunner(config, model_args, source, eos, max_len, progress)
        # A sequence never needs more blocks than the whole pool.
        self.max_model_len = min(max_len, self.runner.num_blocks * config.block_size)
        num_blocks = self.runner.num_blocks
        tenant_cap = (None if config.tenant_max_blocks_fraction is None
                      else max(1, int(num_blocks * config.tenant_max_blocks_fraction)))
        self.block_manager = BlockManager(num_blocks, config.block_size, config.enable_prefix_caching,
                                          int(num_blocks * config.max_pinned_fraction), tenant_cap)
        self.scheduler = Scheduler(self.block_manager, config.max_num_seqs, config.max_num_batched_tokens)
        self.output_processor = OutputProcessor(self.scheduler, self.tokenizer, eos, self.max_model_len)
        self.grammars = Grammars(self.tokenizer, model_args.vocab_size, eos)
        self.num_prompt_tokens_total = 0
        self.async_scheduling = None
        # One rank only: an async-scheduled step feeds rank 0's argmax on its GPU, which other ranks
        # never see.
        if config.async_scheduling and config.tensor_parallel_size == 1 and self.runner.graphs is not None:
            from .async_scheduling import AsyncScheduling

            self.async_scheduling = AsyncScheduling(self)

    # -- requests ------------------------------------------------------------------------------------
    def validate(self, prompt_token_ids: list[int], params: SamplingParams) -> array:
        """Raise InvalidRequestError for a bad request; returns the prompt as an int64 array."""
        return validate_request(prompt_token_ids, params, self.model_args.vocab_size, self.max_model_len,
                                self.tokenizer)

    def add_request(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams,
                    tenant: str | None = None, prompt: str | None = None,
                    validated: array | None = None) -> Sequence:
        """Queue a request. `validated`: what validate(prompt_token_ids, params) returned, from a caller
        that validated first (a server refuses bad input before it queues anything); not checked again."""
        if request_id in self.output_processor:
            raise InvalidRequestError(f"request id {request_id!r} is already running", field="request_id")
        ids = validated if validated is not None else self.validate(prompt_token_ids, params)
        # Requests added since the last step sit in the waiting queue until it runs; those that the next
        # step admits into free sequence slots are not queued, so a burst is not refused for them.
        num_queued = self.scheduler.num_waiting - max(0, self.config.max_num_seqs - self.scheduler.num_running)
        if num_queued >= self.config.max_num_waiting:
            raise QueueFullError(f"{num_queued} requests are waiting; try again shortly")
        seq = Sequence(request_id, list(prompt_token_ids), params, tenant, prompt, prompt_array=ids)
        if params.structured_outputs is not None:  # compiled here (cached): a bad one never reaches a step
            seq.grammar = self.grammars.matcher(params.structured_outputs)
        self.output_processor.add(seq)
        self.scheduler.add(seq)
        return seq

    def abort(self, request_id: str) -> StreamDelta | None:
        """Stop a request now and free its blocks. Returns its final delta, or None if unknown."""
        return self.output_processor.abort(request_id)

    def add_pin(self, key: str, prompt_token_ids: list[int], tenant: str | None,
                on_pinned: Callable[[Pin | Exception], None]) -> None:
        """Compute a prefix and pin its full blocks; `on_pinned` gets the Pin (or the error)."""
        ids = self.validate(prompt_token_ids, SamplingParams(max_tokens=1))
        self.block_manager.check_pin_capacity(key, len(prompt_token_ids))
        request_id = f"pin:{key}:{time.monotonic_ns()}"
        seq = Sequence(request_id, list(prompt_token_ids), SamplingParams(max_tokens=1), tenant,
                       pin_key=key, prompt_array=ids)
        self.output_processor.add(seq, on_pinned)
        self.scheduler.add(seq)

    def unpin(self, key: str) -> bool:
        return self.block_manager.unpin(key)

    def has_unfinished(self) -> bool:
        return self.scheduler.has_work()

    def shutdown(self) -> None:
        """Stop a tensor-parallel engine's worker processes (a no-op on one rank) and wait for the
        grammar threads. Idempotent."""
        self.grammars.close()
        self.runner.shutdown()

    # -- the step ------------------------------------------------------------------------------------
    @property
    def num_steps(self) -> int:
        return self.output_processor.num_steps

    @property
    def trace(self) -> list[StepTrace] | None:
        """Every step's StepTrace since tracing was switched on (`trace = []`), or None (the default)."""
        return self.output_processor.trace

    @trace.setter
    def trace(self, trace: list[StepTrace] | None) -> None:
        self.output_processor.trace = trace

    def step(self) -> list[StreamDelta]:
        if self.async_scheduling is not None:
            deltas = self.async_scheduling.step()
            if deltas is not None:
                return deltas
        out = self.scheduler.schedule()
        if out.is_empty:
            return []
        return self.run_step(out)

    def run_step(self, out: SchedulerOutput) -> list[StreamDelta]:
        """Compute a scheduled step, wait for its tokens and post-process them."""
        outputs = self.output_processor
        trace = outputs.begin_step(out)
        results, failed = self._execute_isolating_failures(out)
        deltas: list[StreamDelta] = [outputs.fail(seq, error) for seq, error in failed]
        now = time.monotonic()
        block_size = self.block_manager.block_size
        for s, result in zip(out.scheduled, results):
            seq = s.seq
            if result is _FAILED:
                continue
            seq.num_computed_tokens += s.num_new_tokens
            if seq.num_computed_tokens // block_size > seq.num_committed_blocks:
                self.block_manager.commit(seq)
            if seq.pin_key is not None:
                if s.sample:
                    self._complete_pin(seq)
                continue
            if s.start < seq.num_prompt_tokens:
                self.num_prompt_tokens_total += min(seq.num_prompt_tokens, seq.num_computed_tokens) - s.start
            if result is None:
                continue
            token, logprobs, prompt_logprobs = result
            if prompt_logprobs:
                seq.prompt_logprobs += prompt_logprobs
            if token is None:
                continue
            delta = outputs.append(seq, token, logprobs, now, trace)
            if delta is not None:
                deltas.append(delta)
        return deltas

    def _execute_isolating_failures(self, out: SchedulerOutput):
        """Run the step; if it raises, rerun its sequences one by one so only the culprit fails."""
        try:
            return self.runner.execute(out), []
        except EngineDeadError:  # a tensor-parallel worker is gone: no request can run
            raise
        except Exception:  # noqa: BLE001 - isolated below, reported per request
            pass
        results, failed = [], []
        for s in out.scheduled:
            try:
                results.append(self.runner.execute(SchedulerOutput([s], s.num_new_tokens))[0])
            except EngineDeadError:
                raise
            except Exception as e:  # noqa: BLE001
                log.exception("request %s failed inside the engine", s.seq.request_id)
                results.append(_FAILED)
                failed.append((s.seq, f"{type(e).__name__}: {e}"))
        return results, failed

    def _complete_pin(self, seq: Sequence) -> None:
        try:
            pin = self.block_manager.pin(seq.pin_key, seq)
        except Exception as e:  # noqa: BLE001 - handed to the caller
            pin = e
        self.output_processor.complete_pin(seq, pin)

    # -- stats ---------------------------------------------------------------------------------------
    def stats(self) -> dict:
        bm, pool, sched = self.block_manager, self.block_manager.pool, self.scheduler
        return {
            "model": self.model_name,
            "num_running": sched.num_running,
            "num_waiting": sched.num_waiting,
            "num_blocks_total": pool.num_blocks,
            "num_blocks_used": pool.num_used,
            "num_blocks_free": pool.num_free,
            "num_blocks_cached": pool.num_cached,
            "num_blocks_pinned": bm.num_pinned_blocks,
            "block_size": bm.block_size,
            "prefix_cache_queries": bm.num_queried_tokens,
            "prefix_cache_hits": bm.num_hit_tokens,
            "num_evictions": pool.num_evictions,
            "num_preemptions": sched.num_preemptions,
            "prompt_tokens_total": self.num_prompt_tokens_total,
            "generation_tokens_total": self.output_processor.num_generation_tokens_total,
            "num_steps": self.num_steps,
            "pins": {k: {"tenant": p.tenant, "num_tokens": p.num_tokens, "num_blocks": len(p.block_ids)}
                     for k, p in bm.pins.items()},
            "per_tenant": {("" if t is None else t): v for t, v in bm.tenant_stats().items()},
        }
