"""A worker process (rank > 0) of a tensor-parallel engine: load its shard, then mirror rank 0's steps.

Spawned by TensorParallelRunner (torch.multiprocessing, spawn context: CUDA cannot be forked). The loop
runs each step's forward pass and nothing else: no sampling, no logits on the eager path. It ends when
rank 0 sends None (engine shutdown), when rank 0's connection breaks, or, whatever the worker is
blocked in (an NCCL all-reduce included), within a second of rank 0's process going away.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import torch

from ..config import EngineConfig
from ..model_runner import ModelRunner
from ..models import ModelArgs
from .group import connect_store, init_group, rank_device
from .steps import decode_step

log = logging.getLogger("inference")


def run_worker(rank: int, size: int, port: int, config: EngineConfig, args: ModelArgs,
               weights: Path | dict | None, max_model_len: int, parent_pid: int) -> None:
    """The body of rank `rank`'s process (config.device is already resolved to "cpu" or "cuda")."""
    _exit_with_parent(parent_pid)
    device = rank_device(config.device, rank)
    if device.type == "cpu":  # the ranks share the host's cores
        torch.set_num_threads(max(1, torch.get_num_threads() // size))
    group = init_group(rank, size, connect_store(port, size, rank), device)
    runner = ModelRunner(config, args, weights, [], max_model_len, progress=False, tp=group)
    while True:
        try:
            message = group.receive_step()
        except RuntimeError as e:  # rank 0's end of the connection closed: the engine is gone
            log.warning("tensor-parallel rank %d: lost rank 0 (%s); exiting", rank, str(e).splitlines()[0])
            os._exit(1)
        if message is None:
            break
        try:
            runner.forward(decode_step(message), compute_logits=False)
        except Exception:  # noqa: BLE001 - rank 0 raised on the same step and isolates it (engine.py)
            log.exception("tensor-parallel rank %d: a step failed", rank)
    runner.graphs = runner.prefill_graphs = None  # release the graphs before their communicator
    del runner
    group.destroy()


def _exit_with_parent(parent_pid: int) -> None:
    """Exit as soon as rank 0's process is gone, even from inside a collective that would never end."""
    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="pagoda-tp-parent-watch", daemon=True).start()
