"""ModelRunner: everything that touches the device — weights, the KV cache pool, one step's tensors,
the forward pass and sampling. It reads the SchedulerOutput and the sequences' tokens and block
tables, never the scheduler's queues.

Under tensor parallelism (`tp` given) each rank has its own ModelRunner over its shard of the model
and its KV heads; rank 0's is driven by distributed.runner.TensorParallelRunner, the others by
distributed.worker, which call `forward` only.
"""
from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from .attention import AttentionMetadata, StepContext
from .config import EngineConfig
from .model_loader import load_state, load_weights
from . import ops
from .models import LlamaForCausalLM, ModelArgs, build_model
from .models.llama import Linear
from .ops import build_cos_sin_cache
from .grammar import fill_bitmask
from .prompt_logprobs import compute as compute_prompt_logprobs, wanted_positions
from .sampler import SamplingRow, sample
from .scheduler import SchedulerOutput
from .sequence import Sequence

if TYPE_CHECKING:
    from .distributed.group import TPGroup

log = logging.getLogger("inference")
# What a step reports for one sequence: (sampled token, its logprobs, prompt logprobs); see execute().
StepResult = tuple[int | None, dict[int, float] | None, list | None]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def store_projections_column_major(model: LlamaForCausalLM) -> None:
    """Keep the o, gate_up and down projections' [out, in] weights with column-major strides (the same
    tensor to every reader, transposed in memory). cuBLAS then runs x @ W^T as a plain NN product,
    whose kernels read these weights faster at the row counts of decode and chat turns: on an H200 at
    64 rows, gate_up 63.9 -> 61.0 us, down 37.5 -> 36.5, o 12.9 -> 12.3. qkv stays row-major: the
    same at 1-64 rows, slower at 256."""
    for layer in model.layers:
        for proj in (getattr(layer, name, None) for name in ("o_proj", "gate_up_proj", "down_proj")):
            if proj is None:  # a mixture-of-experts layer has no dense MLP
                continue
            with torch.no_grad():
                proj.weight = torch.nn.Parameter(proj.weight.t().contiguous().t(), requires_grad=False)


def pack_linears_for_cpu(model: LlamaForCausalLM) -> None:
    """Run every projection and the lm_head from oneDNN-packed weights (see ops.pack_linear_weight)."""
    if model.lm_head is None:  # tied: the lm_head gets its own packed copy; the embedding keeps its table
        args = model.args
        model.lm_head = Linear(args.hidden_size, args.vocab_size, bias=False, device="meta")
        model.lm_head.weight = model.embed_tokens.weight
    for module in model.modules():
        if isinstance(module, Linear):
            module.pack()


class ModelRunner:
    def __init__(self, config: EngineConfig, args: ModelArgs, weights: Path | dict | None,
                 eos_token_ids: list[int], max_model_len: int, progress: bool = True,
                 tp: "TPGroup | None" = None):
        """args: the whole model's shape; with `tp`, this rank builds and loads its shard of it."""
        self.config = config
        self.tp = tp
        self.device = torch.device(config.resolved_device())
        if tp is None:
            self.args = args
        else:
            from .distributed.sharding import shard_args

            self.args = args = shard_args(args, tp.size)  # this rank's heads, KV heads and MLP width
            if self.device.type == "cuda":
                self.device = torch.device("cuda", tp.rank)
        if config.dtype == "auto":
            self.dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        else:
            self.dtype = DTYPES[config.dtype]
        # e4m3 KV: one byte an element, so about twice the blocks in the same memory.
        self.kv_dtype = torch.float8_e4m3fn if config.kv_cache_dtype == "fp8" else self.dtype
        self.block_size = config.block_size
        self.eos_token_ids = eos_token_ids
        self.max_model_len = max_model_len
        torch.manual_seed(config.seed)
        if self.device.type == "cuda":
            # cuBLASLt's heuristics pick faster kernels for the skinny products of decode and chat
            # turns (H200, 64 rows, column-major weights: gate_up 62.3 -> 57.9 us, down 35.5 -> 31.6).
            torch.backends.cuda.preferred_blas_library("cublaslt")
        self.model = self._build_model(weights, progress)
        self.cos_sin_cache = build_cos_sin_cache(args.head_dim, max_model_len, args.rope_theta,
                                                 args.rope_scaling).to(self.device)
        self.scale = 1.0 / math.sqrt(args.head_dim)
        self.layer_windows = args.layer_windows()
        self.num_blocks = config.num_kv_blocks or self._blocks_that_fit()
        if tp is not None:  # rank 0 hands out block ids for every rank: the pool that fits on all of them
            self.num_blocks = tp.min(self.num_blocks)
        shape = (args.num_layers, 2, self.num_blocks, self.block_size, args.num_kv_heads, args.head_dim)
        self.kv_cache = torch.empty(shape, dtype=self.kv_dtype, device=self.device)
        self.kv_caches = [(self.kv_cache[i, 0], self.kv_cache[i, 1]) for i in range(args.num_layers)]
        # (k_scale, v_scale) of each layer's e4m3 cache: 1.0, as vLLM's fp8 KV without calibration.
        self.kv_scales = torch.ones(args.num_layers, 2, dtype=torch.float32, device=self.device)
        self.max_blocks_per_seq = -(-max_model_len // self.block_size)
        self.graphs = self.prefill_graphs = None
        self.gemm_choices = []
        self._bitmask_host: torch.Tensor | None = None  # structured outputs' token bitmask, reused
        if self.device.type == "cuda" and not config.enforce_eager:
            from .cuda_graphs import DecodeGraphs, PrefillGraphs

            if config.tune_gemms:
                self._tune_gemms(DecodeGraphs.captured_sizes(config) + (
                    list(PrefillGraphs.SIZES) if config.prefill_graphs else []))
            self.graphs = DecodeGraphs(self)
            try:
                if config.prefill_graphs:
                    self.prefill_graphs = PrefillGraphs(self)
            except Exception:  # noqa: BLE001 - an optimisation: without it, short prefills run eagerly
                if tp is not None:  # the other ranks captured theirs: running eagerly here would diverge
                    raise
                log.exception("capturing prefill graphs failed; short prefills will run eagerly")
                torch.cuda.synchronize()

    # -- set-up ------------------------------------------------------------------------------------
    def _build_model(self, weights: Path | dict | None, progress: bool) -> LlamaForCausalLM:
        """weights: a folder of safetensors, a dict of Hugging Face-named tensors, or None (random)."""
        with torch.device(self.device):
            model = build_model(self.args).to(self.dtype)
        shard = None if self.tp is None else (self.tp.rank, self.tp.size)
        if weights is None:  # random weights (benchmarks of a model shape)
            with torch.no_grad():
                for p in model.parameters():
                    if p.dim() > 1:
                        p.normal_(0.0, 0.02)
        elif isinstance(weights, dict):
            load_state(model, weights.items(), len(weights), progress, shard)
        else:
            load_weights(model, weights, progress, shard)
        if self.config.quantization == "fp8":
            from .quantization import quantize_model_fp8

            quantize_model_fp8(model)  # FP8 GEMMs take the weight row-major: no column-major copy
        elif self.device.type == "cuda":
            store_projections_column_major(model)
        elif ops.can_pack_linear(model.embed_tokens.weight):
            pack_linears_for_cpu(model)
        if self.tp is not None:  # after the projections are final: its all-reduce hooks sit on them
            from .distributed.sharding import parallelize

            parallelize(model, self.tp)
        return model.eval().requires_grad_(False)

    def _tune_gemms(self, row_counts: list[int]) -> None:
        from .gemm_tuner import tune_model

        try:
            self.gemm_choices = tune_model(self.model, row_counts)
        except Exception:  # noqa: BLE001 - an optimisation: without it, torch's picks run
            log.exception("GEMM tuning failed; torch's cuBLAS choices stay")
            for m in self.model.modules():
                if hasattr(m, "tuned"):
                    m.tuned.clear()

    def bytes_per_block(self) -> int:
        a = self.args
        return 2 * a.num_layers * self.block_size * a.num_kv_heads * a.head_dim * self.kv_dtype.itemsize

    def _blocks_that_fit(self) -> int:
        if self.device.type != "cuda":
            return max(2, self.config.cpu_kv_cache_bytes // self.bytes_per_block())
        free, total = torch.cuda.mem_get_info(self.device)
        a, c = self.args, self.config
        # Peak activations of the largest step, plus the sampler's fp32 logits and their sort.
        activations = (c.max_num_batched_tokens * (4 * a.intermediate_size + 8 * a.hidden_size) * 4
                       + c.max_num_seqs * a.vocab_size * 4 * 6)
        budget = total * c.gpu_memory_utilization - (total - free) - activations - 2 * 1024**3
        return max(2, int(budget // self.bytes_per_block()))

    # -- one step ------------------------------------------------------------------------------------
    def prepare(self, out: SchedulerOutput) -> tuple[torch.Tensor, torch.Tensor, AttentionMetadata, list[int]]:
        bs = self.block_size
        input_ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        seq_lens: list[int] = []
        cu = [0]
        logits_indices: list[int] = []
        for s in out.scheduled:
            seq, start, n = s.seq, s.start, s.num_new_tokens
            input_ids += seq.token_ids(start, start + n)
            positions += range(start, start + n)
            table = seq.block_table
            slots += [table[p // bs] * bs + p % bs for p in range(start, start + n)]
            seq_lens.append(start + n)
            cu.append(cu[-1] + n)
            if s.sample and seq.pin_key is None:
                logits_indices.append(cu[-1] - 1)
        width = max(len(s.seq.block_table) for s in out.scheduled)
        tables = [s.seq.block_table + [0] * (width - len(s.seq.block_table)) for s in out.scheduled]
        dev = self.device
        q_lens = [b - a for a, b in zip(cu, cu[1:])]
        meta = AttentionMetadata(
            slot_mapping=torch.tensor(slots, dtype=torch.int64, device=dev),
            block_tables=torch.tensor(tables, dtype=torch.int32, device=dev),
            seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=dev),
            cu_seqlens_q=torch.tensor(cu, dtype=torch.int32, device=dev),
            max_q_len=max(q_lens),
            max_seq_len=max(seq_lens),
            decode_only=max(q_lens) == 1,
        )
        return (torch.tensor(input_ids, dtype=torch.int64, device=dev),
                torch.tensor(positions, dtype=torch.int64, device=dev), meta, logits_indices)

    @torch.inference_mode()
    def forward(self, out: SchedulerOutput, compute_logits: bool = True,
                prompt_logprobs: dict | None = None) -> torch.Tensor | None:
        """Run the model over one step (writing its K/V); returns the logits of its sampled rows.

        compute_logits=False (a tensor-parallel worker, which never samples) skips the lm_head where it
        is not part of a CUDA graph, and returns None. A step that holds prompt positions whose logits a
        request wants runs eagerly on every rank; rank 0 puts their logprobs into `prompt_logprobs`
        (index in out.scheduled -> TokenLogprobs; see prompt_logprobs.py).
        """
        if self.graphs is not None and self.graphs.can_run(out):
            return self.graphs.run(out)  # a decode step: it never needs prompt logits
        wanted = wanted_positions(out)
        if not wanted and self.prefill_graphs is not None and self.prefill_graphs.can_run(out):
            return self.prefill_graphs.run(out)
        input_ids, positions, meta, logits_indices = self.prepare(out)
        ctx = self.step_context(meta)
        hidden = self.model(input_ids, positions, ctx)
        if wanted and prompt_logprobs is not None:
            prompt_logprobs.update(compute_prompt_logprobs(self.model, hidden, out, wanted))
        if not (compute_logits and logits_indices):
            return None
        return self.model.compute_logits(hidden[logits_indices])

    def step_context(self, meta: AttentionMetadata) -> StepContext:
        """The ForwardContext of one step (eager or captured) over this runner's KV caches."""
        # An e4m3 pool: the kernels read it with each layer's scales (no dequantized copy, graphs kept).
        kv_scales = self.kv_scales if self.kv_dtype != self.dtype else None
        return StepContext(self.kv_caches, meta, self.cos_sin_cache, self.scale, self.layer_windows, kv_scales)

    @torch.inference_mode()
    def execute(self, out: SchedulerOutput) -> list[StepResult | None]:
        """Run one step. Returns, per scheduled sequence, None if it has nothing to report, else
        (token id or None, its logprobs or None, its prompt tokens' logprobs computed this step or None):
        a token if it was sampled, prompt logprobs if it asked for them."""
        prompt_logprobs: dict[int, list] = {}
        # On CUDA the forward is queued: the host goes on (the grammar mask) while it runs.
        logits = self.forward(out, prompt_logprobs=prompt_logprobs)
        sampled_seqs = [s.seq for s in out.scheduled if s.sample and s.seq.pin_key is None]
        results: list[StepResult | None] = [None] * len(out.scheduled)
        for i, entries in prompt_logprobs.items():
            results[i] = (None, None, entries)
        if not sampled_seqs:
            return results
        logits = logits[:len(sampled_seqs)]
        mask = self._grammar_mask(sampled_seqs, logits.shape[1])
        result = sample(logits, [self._row(seq) for seq in sampled_seqs], mask)
        it = iter(zip(result.token_ids, result.logprobs))
        for i, s in enumerate(out.scheduled):
            if s.sample and s.seq.pin_key is None:
                token, logprobs = next(it)
                results[i] = (token, logprobs, prompt_logprobs.get(i))
        return results

    def shutdown(self) -> None:
        """Nothing to release on one rank (the tensor-parallel runner stops its workers here)."""

    def _grammar_mask(self, seqs: list[Sequence], vocab_size: int) -> tuple[torch.Tensor, list[int]] | None:
        """The token bitmask of the constrained rows on the device, and which rows they are; None when
        no row is constrained (nothing is allocated or copied). Filled on the CPU while the device runs
        the step's forward pass."""
        rows = [i for i, seq in enumerate(seqs) if seq.grammar is not None]
        if not rows:
            return None
        width = (vocab_size + 31) // 32
        host = self._bitmask_host
        if host is None or host.shape[0] < len(seqs) or host.shape[1] != width:
            num_rows = max(len(seqs), self.config.max_num_seqs)
            host = self._bitmask_host = torch.empty(num_rows, width, dtype=torch.int32,
                                                    pin_memory=self.device.type == "cuda")
        fill_bitmask([seqs[i].grammar for i in rows], rows, host)
        # The host buffer is reused next step: the sampler's read of the tokens (same stream) comes
        # after this copy, so the copy is done before the buffer is filled again.
        return host[:len(seqs)].to(self.device, non_blocking=True), rows

    def _row(self, seq: Sequence) -> SamplingRow:
        p = seq.params
        if p.seed is not None and seq.generator is None:
            seq.generator = torch.Generator(device=self.device).manual_seed(p.seed)
        blocked: list[int] = []
        # A grammar that may end now decides when to stop: min_tokens must not block its only way out.
        if seq.num_output_tokens < p.min_tokens and not (seq.grammar is not None and seq.grammar.is_completed()):
            blocked = p.stop_token_ids + ([] if p.ignore_eos else self.eos_token_ids)
        return SamplingRow(p, seq.prompt_token_ids, seq.output_token_ids, seq.generator, blocked)
