"""The process group of a tensor-parallel engine: its collectives, and the step broadcast.

Two groups over the same ranks: the default one carries the model's all-reduces (NCCL on CUDA, gloo on
CPU); a gloo group on the CPU carries rank 0's step descriptions and start-up agreements, so a worker
waits for the next step without a GPU in the loop and for as long as the engine stays idle.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

log = logging.getLogger("inference")

HOST = "127.0.0.1"  # one host: the ranks meet on the loopback interface
START_TIMEOUT = timedelta(minutes=5)  # every rank joins the store within this
DATA_TIMEOUT = timedelta(minutes=10)  # one all-reduce (ranks run the same step: only a dead rank waits)
CONTROL_TIMEOUT = timedelta(days=365)  # a worker waits for the next step however long the engine idles


def joined_key(rank: int) -> str:
    return f"pagoda/joined/{rank}"


def create_store(size: int) -> dist.TCPStore:
    """Rank 0's rendezvous store, on a free port the OS picks (read it from `store.port`)."""
    return dist.TCPStore(HOST, 0, size, is_master=True, timeout=START_TIMEOUT, wait_for_workers=False)


def connect_store(port: int, size: int, rank: int) -> dist.TCPStore:
    """A worker's connection to rank 0's store; announces that this rank's process is up."""
    store = dist.TCPStore(HOST, port, size, is_master=False, timeout=START_TIMEOUT)
    store.set(joined_key(rank), "1")
    return store


@dataclass
class TPGroup:
    """This process's rank in the tensor-parallel group, and the group's collectives."""

    rank: int
    size: int
    control: Any  # gloo ProcessGroup on the CPU: step broadcasts, start-up agreements

    def all_reduce(self, x: torch.Tensor) -> None:
        """Sum `x` over the ranks, in place (the row-parallel layers' partial outputs)."""
        dist.all_reduce(x)

    def min(self, value: int) -> int:
        """The smallest `value` over the ranks (e.g. KV blocks that fit on every GPU)."""
        t = torch.tensor([value], dtype=torch.int64)
        dist.all_reduce(t, op=dist.ReduceOp.MIN, group=self.control)
        return int(t.item())

    def broadcast_step(self, step: Any) -> None:
        """Rank 0: send one step description (None: stop) to every worker."""
        dist.broadcast_object_list([step], src=0, group=self.control)

    def receive_step(self) -> Any:
        """A worker: wait for rank 0's next step description."""
        box = [None]
        dist.broadcast_object_list(box, src=0, group=self.control)
        return box[0]

    def destroy(self) -> None:
        destroy_group(self.rank)


def destroy_group(rank: int = 0, timeout: float = 10.0) -> None:
    """Leave the process group, if any (a later engine in this process may form a new one).

    In a thread with a time limit: destroying NCCL communicators used inside CUDA graphs has been
    seen to hang (pytorch/pytorch#115388), and shutting down must not.
    """
    if not dist.is_initialized():
        return
    thread = threading.Thread(target=dist.destroy_process_group, name="pagoda-tp-destroy", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        log.warning("rank %d: destroying the tensor-parallel process group timed out", rank)


def rank_device(device_type: str, rank: int) -> torch.device:
    """The device of `rank`: cuda:rank (one GPU per rank), or the CPU."""
    return torch.device("cuda", rank) if device_type == "cuda" else torch.device("cpu")


def init_group(rank: int, size: int, store: dist.Store, device: torch.device) -> TPGroup:
    """Join the group as `rank`; on CUDA, this process's GPU is cuda:rank (set before NCCL starts)."""
    if sys.platform == "linux":  # gloo finds its interface from the host name unless told; one host
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    kwargs: dict = {}
    backend = "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
        backend, kwargs["device_id"] = "nccl", device  # device_id: NCCL's communicator starts now
    dist.init_process_group(backend, store=store, rank=rank, world_size=size, timeout=DATA_TIMEOUT, **kwargs)
    control = dist.new_group(backend="gloo", timeout=CONTROL_TIMEOUT)
    return TPGroup(rank, size, control)


def wait_until_joined(store: dist.TCPStore, workers: list,
                      timeout: float = START_TIMEOUT.total_seconds()) -> None:
    """Rank 0: wait for every worker process to reach the store, failing fast if one exits first."""
    keys = [joined_key(rank) for rank in range(1, len(workers) + 1)]
    deadline = time.monotonic() + timeout
    while not store.check(keys):
        for p in workers:
            if not p.is_alive():
                raise RuntimeError(f"tensor-parallel worker {p.name} exited with code {p.exitcode} "
                                   "while starting")
        if time.monotonic() > deadline:
            raise RuntimeError(f"tensor-parallel workers did not start within {timeout:.0f} s")
        time.sleep(0.02)
