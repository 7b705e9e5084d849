"""Grammars: the engine's side of structured outputs (xgrammar).

`Grammars` compiles each distinct constraint once for the engine's vocabulary (an LRU of compiled
grammars keyed by `StructuredOutputsParams.key()`) and hands every constrained sequence its own
matcher. The matcher accepts each token the sequence samples (OutputProcessor.accept) and, before the
next one is sampled, fills that row of a token bitmask on the CPU (`fill_bitmask`), which the model
runner does while the device runs the step's forward pass; the sampler masks the logits with it on the
device. A preempted sequence keeps its matcher: its output tokens stay, and so does the state.

Compiling a new constraint takes milliseconds to seconds (a large JSON schema). The engine core
compiles it in a thread (`compile_async`) while the request waits and every other stream keeps
stepping; the offline engine compiles in add_request.

Requests without a constraint never reach this module: no bitmask, no copy, no extra sync.
"""
from __future__ import annotations

import functools
import logging
import threading
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any

import torch

from .errors import InvalidRequestError
from .structured_outputs import FIELD, StructuredOutputsParams, clean_error

log = logging.getLogger("inference")

MAX_CACHED_GRAMMARS = 256
BATCH_FILL_MIN_ROWS = 8  # from this many constrained rows, xgrammar's threads fill the bitmask


class Grammars:
    """Compiled grammars of one engine. `tokenizer` is the Hugging Face tokenizer; `vocab_size` the
    model's (its logits' width, which may exceed the tokenizer's); `stop_token_ids` end a grammar."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_token_ids: list[int], max_threads: int = 8):
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.stop_token_ids = list(stop_token_ids)
        self.max_threads = max_threads
        self._compiler = None  # built on the first constrained request, or by warm_up
        self._warming: threading.Thread | None = None
        self._compiler_lock = threading.Lock()
        self._cache: OrderedDict[tuple, Any] = OrderedDict()
        self._cache_lock = threading.Lock()  # compile threads fill the cache while the loop reads it
        self._compiling: dict[tuple, Future] = {}  # constraint key -> its compile in a thread
        self._threads: list[threading.Thread] = []  # those compiles' threads

    def warm_up(self) -> None:
        """Build the compiler in a thread now. Its table of the vocabulary takes 0.18 s for SmolLM2's 49k
        tokens (longer for larger vocabularies); built on the first constrained request instead, it
        would stall every running stream's step that long. The engine core calls this at start."""
        if self.tokenizer is None or self._compiler is not None or self._warming is not None:
            return
        self._warming = threading.Thread(target=self._warm, name="grammar-compiler", daemon=True)
        self._warming.start()

    def close(self, timeout: float = 30.0) -> None:
        """Wait for the compiler's build and the compiles under way (bounded): a process that exits
        while xgrammar's threads run in them is aborted by the C++ runtime ("terminate called")."""
        for thread in [self._warming, *self._threads]:
            if thread is not None:
                thread.join(timeout)

    def _warm(self) -> None:
        try:
            self._compiler = self._build_compiler()
        except Exception:  # noqa: BLE001 - the first constrained request builds it again and says why
            log.warning("could not build the grammar compiler ahead of use", exc_info=True)

    def _build_compiler(self):
        import xgrammar as xgr

        info = xgr.TokenizerInfo.from_huggingface(self.tokenizer, vocab_size=self.vocab_size,
                                                  stop_token_ids=self.stop_token_ids or None)
        # xgrammar's own cache is off: ours is keyed by the request's constraint, bounded, and
        # skips even the tokenizer-free conversion on a hit.
        return xgr.GrammarCompiler(info, max_threads=self.max_threads, cache_enabled=False)

    def _xgr_compiler(self):
        with self._compiler_lock:
            if self._warming is not None:
                self._warming.join()  # at most what is left of the build
                self._warming = None
            if self._compiler is None:
                if self.tokenizer is None:
                    raise InvalidRequestError("structured outputs need a tokenizer; this engine has none",
                                              field=FIELD)
                self._compiler = self._build_compiler()
            return self._compiler

    def _cached(self, key: tuple):
        with self._cache_lock:
            compiled = self._cache.get(key)
            if compiled is not None:
                self._cache.move_to_end(key)
            return compiled

    def compile(self, params: StructuredOutputsParams):
        """The compiled grammar of `params` (cached). Raises InvalidRequestError for a bad constraint."""
        key = params.key()
        compiled = self._cached(key)
        if compiled is not None:
            return compiled
        compiler = self._xgr_compiler()
        grammar = params.to_grammar()
        try:
            compiled = compiler.compile_grammar(grammar)
        except (RuntimeError, ValueError) as e:
            raise InvalidRequestError(f"structured_outputs.{params.kind} cannot be compiled: {clean_error(e)}",
                                      field=FIELD) from None
        with self._cache_lock:
            self._cache[key] = compiled
            if len(self._cache) > MAX_CACHED_GRAMMARS:
                self._cache.popitem(last=False)
        return compiled

    def compile_async(self, params: StructuredOutputsParams) -> Future | None:
        """None when `params`' grammar is compiled already (matcher() is then cheap); otherwise a Future
        done when it is, whose exception is the InvalidRequestError of a bad constraint. It compiles in
        a daemon thread, one per constraint however many requests wait for it."""
        key = params.key()
        if self._cached(key) is not None:
            return None
        future = self._compiling.get(key)
        if future is None:
            future = self._compiling[key] = Future()
            thread = threading.Thread(target=self._compile_into, args=(params, key, future),
                                      name="grammar-compile", daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()
        return future

    def _compile_into(self, params: StructuredOutputsParams, key: tuple, future: Future) -> None:
        try:
            self.compile(params)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting requests
            future.set_exception(e)
        else:
            future.set_result(None)
        finally:
            self._compiling.pop(key, None)

    def matcher(self, params: StructuredOutputsParams):
        """A fresh matcher of `params`' grammar: one per sequence (n choices get n)."""
        import xgrammar as xgr

        return xgr.GrammarMatcher(self.compile(params))


def fill_bitmask(matchers: list, rows: list[int], bitmask: torch.Tensor) -> None:
    """Fill row rows[i] of `bitmask` (int32 [> max(rows), (vocab + 31) // 32], on the CPU) with the
    tokens matchers[i] allows next; many rows are shared out to threads."""
    if len(matchers) >= BATCH_FILL_MIN_ROWS:
        _batch_matcher().batch_fill_next_token_bitmask(matchers, bitmask, rows)
    else:
        for m, row in zip(matchers, rows):
            m.fill_next_token_bitmask(bitmask, row)


@functools.cache
def _batch_matcher():
    import xgrammar as xgr

    return xgr.BatchGrammarMatcher(max_threads="auto")


def apply_bitmask(logits: torch.Tensor, bitmask: torch.Tensor, rows: list[int]) -> None:
    """Set logits[r, t] to -inf where bit t of bitmask[r] is 0, for each r in `rows` (in place;
    `bitmask` on the logits' device)."""
    import xgrammar as xgr

    xgr.apply_token_bitmask_inplace(logits, bitmask, vocab_size=logits.shape[1], indices=rows)
