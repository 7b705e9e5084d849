"""Decode steps captured as CUDA graphs, one per batch size of a ladder.

A decode step of a small model is dozens of tiny kernels: launched one by one from Python, the GPU
waits on the CPU. Replaying a captured graph launches them all at once. Inputs go into static
buffers; a batch is padded up to the next captured size with rows that write nowhere (slot -1) and
attend to nothing (seq_len 0).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from . import ops
from .attention import AttentionMetadata
from .scheduler import SchedulerOutput

if TYPE_CHECKING:
    from .model_runner import ModelRunner


def batch_size_ladder(max_batch: int) -> list[int]:
    sizes = [s for s in (1, 2, 4, 8) if s <= max_batch] + list(range(16, max_batch + 1, 16))
    return sizes if sizes[-1] == max_batch else sizes + [max_batch]


@torch.inference_mode()
def capture_graphs(sizes, forward) -> tuple[dict[int, torch.cuda.CUDAGraph], dict[int, torch.Tensor]]:
    """One graph per size of `forward(size)`, sharing one memory pool; returns (graphs, outputs)."""
    graphs: dict[int, torch.cuda.CUDAGraph] = {}
    outputs: dict[int, torch.Tensor] = {}
    pool = torch.cuda.graph_pool_handle()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for size in sorted(sizes, reverse=True):  # largest first: the smaller ones reuse its memory
            forward(size)  # warm-up: compiles the Triton kernels outside the capture
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool, stream=stream):
                outputs[size] = forward(size)
            graphs[size] = graph
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    return graphs, outputs


def stage_rows(host, out: SchedulerOutput, bs: int, block_size: int) -> int:
    """Fill rows [token, position, slot, seq_len, block table...] of a decode batch padded to `bs`;
    returns the widest block table. Padding rows read token 0 at position 0, write nowhere (slot -1)
    and attend to nothing (seq_len 0). Their token must be reset too: an async-scheduled step leaves the
    placeholder -1 in a row it fed on the device, and an embedding lookup of -1 is out of bounds."""
    host[:bs, :2] = 0
    host[:bs, 2] = -1
    host[:bs, 3] = 0
    width = 0
    for i, s in enumerate(out.scheduled):
        seq, pos = s.seq, s.start
        table = seq.block_table
        row = host[i]
        row[0] = seq.output_token_ids[-1] if seq.output_token_ids else seq.prompt_token_ids[-1]
        row[1] = pos
        row[2] = table[pos // block_size] * block_size + pos % block_size
        row[3] = pos + 1
        row[4:4 + len(table)] = table
        width = max(width, len(table))
    return width


class DecodeGraphs:
    MAX_BATCH = 512  # larger decode batches run eagerly

    @staticmethod
    def captured_sizes(config) -> list[int]:
        """The batch sizes captured for an engine of `config`."""
        return batch_size_ladder(min(config.max_num_seqs, DecodeGraphs.MAX_BATCH))

    def __init__(self, runner: "ModelRunner", max_batch: int | None = None):
        self.runner = runner
        self.max_batch = min(max_batch or runner.config.max_num_seqs, self.MAX_BATCH)
        self.sizes = batch_size_ladder(self.max_batch)
        dev, n, width = runner.device, self.max_batch, runner.max_blocks_per_seq
        self.input_ids = torch.zeros(n, dtype=torch.int64, device=dev)
        self.positions = torch.zeros(n, dtype=torch.int64, device=dev)
        self.slot_mapping = torch.full((n,), -1, dtype=torch.int64, device=dev)
        self.block_tables = torch.zeros(n, width, dtype=torch.int32, device=dev)
        self.seq_lens = torch.zeros(n, dtype=torch.int32, device=dev)
        self.cu_seqlens_q = torch.arange(n + 1, dtype=torch.int32, device=dev)
        # Host staging rows, pinned so the copies to the device are asynchronous.
        # Two pinned staging buffers used in turn: with async scheduling, the copy of the step in flight
        # may still be reading one while the next step is staged into the other.
        self.hosts = [torch.zeros(n, 4 + width, dtype=torch.int64).pin_memory() for _ in range(2)]
        self.turn = 0
        self.graphs, self.logits = capture_graphs(self.sizes, self._forward)

    def _meta(self, bs: int) -> AttentionMetadata:
        return AttentionMetadata(self.slot_mapping[:bs], self.block_tables[:bs], self.seq_lens[:bs],
                                 self.cu_seqlens_q[:bs + 1], 1, self.runner.max_model_len, True)

    def _forward(self, bs: int) -> torch.Tensor:
        r = self.runner
        hidden = r.model(self.input_ids[:bs], self.positions[:bs], r.step_context(self._meta(bs)))
        return r.model.compute_logits(hidden)

    def can_run(self, out: SchedulerOutput) -> bool:
        return (len(out.scheduled) <= self.max_batch
                and all(s.num_new_tokens == 1 and s.sample and s.seq.pin_key is None for s in out.scheduled))

    def run(self, out: SchedulerOutput, feed: tuple[torch.Tensor, list[int]] | None = None) -> torch.Tensor:
        """Replay the graph of the smallest captured size that holds the batch; returns its logits.

        feed = (tokens on the device, index per row or -1): rows whose input token is still being
        computed by the step in flight take it from there, on the device, without a host round trip.
        """
        n = len(out.scheduled)
        bs = next(s for s in self.sizes if s >= n)
        block_size = self.runner.block_size
        self.turn ^= 1
        pinned = self.hosts[self.turn]
        host = pinned.numpy()  # numpy view of the pinned buffer: element writes cost ~100 ns, not ~3 us
        width = stage_rows(host, out, bs, block_size)
        # Only the block-table columns in use travel; the rest of the device buffer is never read.
        staged = pinned[:bs, :4 + width].to(self.runner.device, non_blocking=True)
        self.input_ids[:bs].copy_(staged[:, 0])
        if feed is not None:
            tokens, index = feed
            rows = [i for i, j in enumerate(index) if j >= 0]
            if rows:
                dev = self.runner.device
                self.input_ids[torch.tensor(rows, device=dev)] = tokens[
                    torch.tensor([index[i] for i in rows], device=dev)]
        self.positions[:bs].copy_(staged[:, 1])
        self.slot_mapping[:bs].copy_(staged[:, 2])
        self.seq_lens[:bs].copy_(staged[:, 3])
        self.block_tables[:bs, :width].copy_(staged[:, 4:])
        self.graphs[bs].replay()
        return self.logits[bs][:n]


class PrefillGraphs:
    """Single-sequence prefill steps of a few new tokens, captured as CUDA graphs.

    This is a chat turn: the system prompt and the history are already in the cache, and only the new
    message (tens of tokens) is computed. Run eagerly, such a step is bound by launching ~450 kernels
    from Python; replayed, it is bound by reading the weights once, like a decode step.

    A step's inputs travel as one int64 row, [token ids, seq_len, q_len, start, block table]: the
    host writes it into a pinned buffer with numpy and replays, and the graph does the rest. Its
    first node copies the buffer to the device (a memcpy node: it reads the pinned buffer as it is at
    replay), then one kernel derives positions, cache slots and the int32 metadata
    (kernels/step_row.py). On an H200's host, where each numpy or torch call costs 5-20 µs, staging
    a chat turn's inputs with slices, an eager copy and per-row numpy took ~190 µs of its ~5.6 ms TTFT.
    """

    SIZES = (16, 32, 64, 128)

    def __init__(self, runner: "ModelRunner"):
        self.runner = runner
        dev, n, width = runner.device, max(self.SIZES), runner.max_blocks_per_seq
        self.tail = n  # the row: token ids (n), then [seq_len, q_len, start], then the block table
        self.host = torch.zeros(n + 3 + width, dtype=torch.int64).pin_memory()
        self.host_np = self.host.numpy()
        self.staged = torch.zeros_like(self.host, device=dev)
        self.input_ids = self.staged[:n]
        self.positions = torch.zeros(n, dtype=torch.int64, device=dev)
        self.slot_mapping = torch.full((n,), -1, dtype=torch.int64, device=dev)
        self.last_index = torch.zeros(1, dtype=torch.int64, device=dev)
        self.block_tables = torch.zeros(1, width, dtype=torch.int32, device=dev)
        self.seq_lens = torch.ones(1, dtype=torch.int32, device=dev)
        self.cu_seqlens_q = torch.tensor([0, 1], dtype=torch.int32, device=dev)
        # The warm-up and capture runs compute no row (q_len 0: every slot -1) over one key.
        self.host_np[n:n + 3] = (1, 0, 0)
        self.graphs, self.logits = capture_graphs(self.SIZES, self._forward)
        # Recorded after each replay: once it has fired, that replay's memcpy node has read the row.
        self.replayed = torch.cuda.Event()

    def _forward(self, size: int) -> torch.Tensor:
        r = self.runner
        self.staged.copy_(self.host, non_blocking=True)
        ops.unpack_step_row(self.staged, self.positions[:size], self.slot_mapping[:size], self.seq_lens,
                            self.cu_seqlens_q, self.block_tables[0], self.last_index, self.tail, r.block_size)
        meta = AttentionMetadata(self.slot_mapping[:size], self.block_tables, self.seq_lens, self.cu_seqlens_q,
                                 size, r.max_model_len, False)
        hidden = r.model(self.input_ids[:size], self.positions[:size], r.step_context(meta))
        return r.model.compute_logits(hidden.index_select(0, self.last_index))

    def can_run(self, out: SchedulerOutput) -> bool:
        if len(out.scheduled) != 1:
            return False
        s = out.scheduled[0]
        return 1 < s.num_new_tokens <= self.SIZES[-1]

    def run(self, out: SchedulerOutput) -> torch.Tensor:
        s = out.scheduled[0]
        seq, start, n = s.seq, s.start, s.num_new_tokens
        size = next(z for z in self.SIZES if z >= n)
        t = self.tail
        table = seq.block_table
        h = self.host_np
        # A step that samples nothing (a pin) returns without waiting for its graph, which may still be
        # queued behind earlier work: its copy of the row must happen before the row is rewritten.
        # Almost always long done (a sampled step waited for its tokens), so this costs no wait.
        self.replayed.synchronize()
        # Rows n..size-1 keep stale ids: valid tokens of earlier steps, computed but never read.
        if seq.prompt_array is not None and start + n <= seq.num_prompt_tokens:
            h[:n] = np.frombuffer(seq.prompt_array, dtype=np.int64, count=n, offset=start * 8)
        else:
            h[:n] = seq.token_ids(start, start + n)
        h[t:t + 3] = (start + n, n, start)
        h[t + 3:t + 3 + len(table)] = table  # columns past the table are stale but never read
        self.graphs[size].replay()
        self.replayed.record()
        return self.logits[size]
