"""LLMEngine: the synchronous core. `step()` is schedule -> run -> postprocess -> report.

Not thread-safe: the offline `LLM` drives it directly, and `AsyncLLM` from its one loop thread.
"""
from __future__ import annotations

import logging
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .block_manager import BlockManager, Pin
from .config import EngineConfig
from .detokenizer import IncrementalDetokenizer
from .errors import EngineDeadError, InvalidRequestError, PromptTooLongError, QueueFullError, RequestFailedError
from .model_loader import load_hf_config, load_tokenizer, resolve_model_path
from .model_runner import ModelRunner
from .models import ModelArgs
from .outputs import StreamDelta
from .sampling_params import SamplingParams
from .scheduler import Scheduler, SchedulerOutput
from .sequence import Sequence, SequenceStatus


log = logging.getLogger("inference")
_FAILED = object()  # a step result: this sequence's computation raised


@dataclass
class _Request:
    seq: Sequence
    detok: IncrementalDetokenizer | None
    on_pinned: Callable[[Pin | Exception], None] | None = None


@dataclass
class StepTrace:
    """What one step did, for tests and the dashboard: which requests ran and which joined."""

    step: int
    scheduled: list[tuple[str, int]]  # (request id, tokens computed this step)
    admitted: list[str]
    preempted: list[str]
    finished: list[str] = field(default_factory=list)


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
        if model_args.sliding_window:  # no sliding-window attention: stay inside the window
            max_len = min(max_len, model_args.sliding_window)
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
        self.requests: dict[str, _Request] = {}
        self.num_steps = 0
        self.num_prompt_tokens_total = 0
        self.num_generation_tokens_total = 0
        self.overlap = None
        # One rank only: the overlapped step feeds rank 0's argmax on its GPU, which other ranks never see.
        if config.async_scheduling and config.tensor_parallel_size == 1 and self.runner.graphs is not None:
            from .overlap import OverlappedDecode

            self.overlap = OverlappedDecode(self)
        self.trace: list[StepTrace] | None = None  # set to [] to record every step
        self.last_step_decode_only = False

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
        if request_id in self.requests:
            raise InvalidRequestError(f"request id {request_id!r} is already running", field="request_id")
        ids = validated if validated is not None else self.validate(prompt_token_ids, params)
        # Requests added since the last step sit in the waiting queue until it runs; those that the next
        # step admits into free sequence slots are not queued, so a burst is not refused for them.
        num_queued = self.scheduler.num_waiting - max(0, self.config.max_num_seqs - self.scheduler.num_running)
        if num_queued >= self.config.max_num_waiting:
            raise QueueFullError(f"{num_queued} requests are waiting; try again shortly")
        seq = Sequence(request_id, list(prompt_token_ids), params, tenant, prompt, prompt_array=ids)
        detok = IncrementalDetokenizer.for_request(self.tokenizer, seq.prompt_token_ids, params)
        self.requests[request_id] = _Request(seq, detok)
        self.scheduler.add(seq)
        return seq

    def abort(self, request_id: str) -> StreamDelta | None:
        """Stop a request now and free its blocks. Returns its final delta, or None if unknown."""
        req = self.requests.pop(request_id, None)
        if req is None:
            return None
        self.scheduler.remove(req.seq)
        if req.on_pinned:
            req.on_pinned(InvalidRequestError("pin aborted"))
            return None
        return self._finish(req, "abort", None)

    def add_pin(self, key: str, prompt_token_ids: list[int], tenant: str | None,
                on_pinned: Callable[[Pin | Exception], None]) -> None:
        """Compute a prefix and pin its full blocks; `on_pinned` gets the Pin (or the error)."""
        ids = self.validate(prompt_token_ids, SamplingParams(max_tokens=1))
        self.block_manager.check_pin_capacity(key, len(prompt_token_ids))
        request_id = f"pin:{key}:{time.monotonic_ns()}"
        seq = Sequence(request_id, list(prompt_token_ids), SamplingParams(max_tokens=1), tenant,
                       pin_key=key, prompt_array=ids)
        self.requests[request_id] = _Request(seq, None, on_pinned)
        self.scheduler.add(seq)

    def unpin(self, key: str) -> bool:
        return self.block_manager.unpin(key)

    def has_unfinished(self) -> bool:
        return self.scheduler.has_work()

    def shutdown(self) -> None:
        """Stop a tensor-parallel engine's worker processes (a no-op on one rank). Idempotent."""
        self.runner.shutdown()

    # -- the step ------------------------------------------------------------------------------------
    def step(self) -> list[StreamDelta]:
        if self.overlap is not None:
            deltas = self.overlap.step()
            if deltas is not None:
                return deltas
        out = self.scheduler.schedule()
        if out.is_empty:
            return []
        return self.run_step(out)

    def run_step(self, out: SchedulerOutput) -> list[StreamDelta]:
        """Compute a scheduled step, wait for its tokens and post-process them."""
        self.num_steps += 1
        self.last_step_decode_only = out.num_batched_tokens == len(out.scheduled)
        scheduled_at = time.monotonic()  # before the forward pass: queue time excludes compute
        for seq in out.admitted:
            if seq.first_scheduled_time is None:
                seq.first_scheduled_time = scheduled_at
        results, failed = self._execute_isolating_failures(out)
        deltas: list[StreamDelta] = [self._fail(seq, error) for seq, error in failed]
        trace = None
        if self.trace is not None:
            trace = StepTrace(self.num_steps, [(s.seq.request_id, s.num_new_tokens) for s in out.scheduled],
                              [s.request_id for s in out.admitted], [s.request_id for s in out.preempted])
            self.trace.append(trace)
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
            delta = self._append(self.requests[seq.request_id], result, now)
            if delta is not None:
                deltas.append(delta)
                if trace is not None and delta.finished:
                    trace.finished.append(seq.request_id)
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

    def _fail(self, seq: Sequence, error: str) -> StreamDelta:
        req = self.requests.pop(seq.request_id)
        self.scheduler.remove(seq)
        if req.on_pinned:
            req.on_pinned(RequestFailedError(error))
        delta = self._finish(req, "error", None)
        delta.error = error
        return delta

    def _complete_pin(self, seq: Sequence) -> None:
        req = self.requests.pop(seq.request_id)
        try:
            pin = self.block_manager.pin(seq.pin_key, seq)
        except Exception as e:  # noqa: BLE001 - handed to the caller
            pin = e
        self.scheduler.finish(seq)
        seq.status = SequenceStatus.FINISHED
        req.on_pinned(pin)

    def _append(self, req: _Request, result: tuple[int, dict | None], now: float) -> StreamDelta | None:
        req.seq.output_token_ids.append(result[0])
        return self.accept(req, result, now)

    def accept(self, req: _Request, result: tuple[int, dict | None], now: float) -> StreamDelta | None:
        """Post-process a token already at the end of the sequence's output: stops, text, the delta."""
        seq, params = req.seq, req.seq.params
        token, logprobs = result
        self.num_generation_tokens_total += 1
        if logprobs is not None:
            seq.output_logprobs.append(logprobs)
        if seq.first_token_time is None:
            seq.first_token_time = now
        reason, stop_reason = None, None
        is_eos = token in self.eos_token_ids and not params.ignore_eos
        if token in params.stop_token_ids or is_eos:
            reason, stop_reason = "stop", (token if token in params.stop_token_ids else None)
        elif req.detok is not None:
            stop_reason = req.detok.add(token)
            if stop_reason is not None:
                reason = "stop"
        if reason is None and (seq.num_output_tokens >= (params.max_tokens or self.max_model_len)
                               or seq.num_tokens >= self.max_model_len):
            reason = "length"
        if reason is not None:
            self.scheduler.finish(seq)
            del self.requests[seq.request_id]
            return self._finish(req, reason, stop_reason, [token], logprobs)
        text = req.detok.delta(False) if req.detok else ""
        return self._delta(req, text, [token], False, None, None, logprobs)

    def _finish(self, req: _Request, reason: str, stop_reason, token_ids: list[int] | None = None,
                logprobs: dict | None = None) -> StreamDelta:
        seq = req.seq
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason, seq.stop_reason = reason, stop_reason
        seq.finish_time = time.monotonic()
        text = req.detok.delta(True) if req.detok else ""
        return self._delta(req, text, token_ids or [], True, reason, stop_reason, logprobs)

    def _delta(self, req: _Request, text: str, token_ids: list[int], finished: bool, reason, stop_reason,
               logprobs) -> StreamDelta:
        seq = req.seq
        return StreamDelta(
            request_id=seq.request_id, text=text, token_ids=token_ids, finished=finished,
            finish_reason=reason, num_prompt_tokens=seq.num_prompt_tokens,
            num_cached_tokens=seq.num_cached_tokens, num_output_tokens=seq.num_output_tokens,
            stop_reason=stop_reason, logprobs=[logprobs] if logprobs else None,
            # The timings are only needed on a request's first and last delta: skip the dict otherwise.
            metrics=({"arrival": seq.arrival_time, "first_scheduled": seq.first_scheduled_time,
                      "first_token": seq.first_token_time,
                      "finished": seq.finish_time, "num_preemptions": seq.num_preemptions}
                     if finished or seq.num_output_tokens <= 1 else {}))

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
            "generation_tokens_total": self.num_generation_tokens_total,
            "num_steps": self.num_steps,
            "pins": {k: {"tenant": p.tenant, "num_tokens": p.num_tokens, "num_blocks": len(p.block_ids)}
                     for k, p in bm.pins.items()},
            "per_tenant": {("" if t is None else t): v for t, v in bm.tenant_stats().items()},
        }
