"""TensorParallelRunner: rank 0's side of a tensor-parallel engine, seen by the engine as its ModelRunner.

The seam is `execute(out)`: every step the engine runs (a decode batch, a prefill chunk, a pin's
prefill, one sequence rerun alone after a failed step) is broadcast to the workers before rank 0 runs
it, so the workers run the same forward passes in the same order, and the collectives inside them
match. Everything else (scheduling, blocks, prefix hashes, pins, preemption, aborts) happens on rank 0
only and reaches the workers as block tables and positions in the steps.
"""
from __future__ import annotations

import logging
import os
import weakref
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ..config import EngineConfig
from ..errors import EngineDeadError, InvalidRequestError
from ..model_runner import ModelRunner
from ..models import ModelArgs
from ..scheduler import SchedulerOutput
from .group import TPGroup, create_store, destroy_group, init_group, rank_device, wait_until_joined
from .sharding import check_tensor_parallel
from .steps import encode_step
from .worker import run_worker

log = logging.getLogger("inference")


class TensorParallelRunner:
    """Rank 0's ModelRunner over its shard, plus one spawned process per other rank.

    Takes ModelRunner's arguments (`args` is the whole model's shape) and validates the split before
    starting anything. Reads of other attributes (num_blocks, graphs, model, device, ...) are rank 0's
    runner's; do not assign them: rank 0 and the workers must keep taking the same code paths.
    """

    def __init__(self, config: EngineConfig, args: ModelArgs, weights: Path | dict | None,
                 eos_token_ids: list[int], max_model_len: int, progress: bool = True):
        size = config.tensor_parallel_size
        check_tensor_parallel(args, size)
        device = config.resolved_device()
        if device == "cuda" and torch.cuda.device_count() < size:
            raise InvalidRequestError(f"tensor_parallel_size {size} needs {size} GPUs; "
                                      f"{torch.cuda.device_count()} are visible", field="tensor_parallel_size")
        if dist.is_initialized():
            raise InvalidRequestError("this process already holds a tensor-parallel engine (one process "
                                      "group per process): shut it down first", field="tensor_parallel_size")
        config = replace(config, device=device)
        self.size = size
        self.closed = False
        self.group: TPGroup | None = None
        self._store = create_store(size)  # rank 0 serves the rendezvous; it lives as long as the group
        ctx = mp.get_context("spawn")
        self.workers = [ctx.Process(target=run_worker, name=f"pagoda-tp-rank{rank}", daemon=True,
                                    args=(rank, size, self._store.port, config, args, weights, max_model_len,
                                          os.getpid()))
                        for rank in range(1, size)]
        try:
            for p in self.workers:
                p.start()
            wait_until_joined(self._store, self.workers)
            self.group = init_group(0, size, self._store, rank_device(device, 0))
            self.local = ModelRunner(config, args, weights, eos_token_ids, max_model_len, progress,
                                     tp=self.group)
        except BaseException:
            codes = _stop(self.workers)
            log.error("tensor-parallel start failed; worker exit codes %s", codes)
            raise
        # Not shut down (dropped, or the interpreter exits): the workers are killed, the group left.
        self._finalizer = weakref.finalize(self, _stop, self.workers)

    def __getattr__(self, name: str):
        if name == "local":  # not built yet
            raise AttributeError(name)
        return getattr(self.local, name)

    def __setattr__(self, name: str, value) -> None:
        local = self.__dict__.get("local")
        if local is not None and name in vars(local):  # e.g. prefill_graphs = None, on rank 0 alone
            raise AttributeError(f"{name} is rank 0's ModelRunner state: changing it there alone would "
                                 "make rank 0 and the workers run different steps")
        super().__setattr__(name, value)

    def execute(self, out: SchedulerOutput) -> list[tuple[int, dict[int, float] | None] | None]:
        """Broadcast the step, run rank 0's shard of it, sample. Raises EngineDeadError if a worker is gone."""
        dead = [f"{p.name} (exit code {p.exitcode})" for p in self.workers if not p.is_alive()]
        if self.closed or dead:
            raise EngineDeadError("the tensor-parallel engine is shut down" if self.closed
                                  else f"tensor-parallel workers exited: {', '.join(dead)}")
        try:
            self.group.broadcast_step(encode_step(out))
        except RuntimeError as e:  # a worker's end of the connection closed
            raise EngineDeadError(f"lost a tensor-parallel worker: {str(e).splitlines()[0]}") from e
        return self.local.execute(out)

    def shutdown(self, timeout: float = 30.0) -> None:
        """Tell the workers to stop, wait for them (killing any that hang), leave the group. Idempotent."""
        if self.closed:
            return
        self.closed = True
        if all(p.is_alive() for p in self.workers):
            try:
                self.group.broadcast_step(None)
            except RuntimeError:
                log.warning("tensor-parallel shutdown: a worker was already gone")
        for p in self.workers:
            p.join(timeout)
        self.local.graphs = self.local.prefill_graphs = None  # release the graphs before their communicator
        self._finalizer.detach()
        codes = _stop(self.workers)
        if any(code != 0 for code in codes):
            log.warning("tensor-parallel workers ended with exit codes %s", codes)


def _stop(workers: list) -> list[int | None]:
    """Kill the workers still running, reap them, leave the group; returns their exit codes."""
    for p in workers:
        if p.is_alive():
            p.kill()
    for p in workers:
        if p.pid is not None:
            p.join(10)
    destroy_group()
    return [p.exitcode for p in workers]
