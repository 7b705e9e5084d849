"""L2 prefetch: ask the memory system to bring bytes into L2 now, so a later kernel reads them from L2.

A chat turn after a cached prefix is a forward pass of ~64 rows, bound by reading the weights; while
the attention of a layer runs (tens of µs of small, latency-bound programs) HBM sits mostly idle, and
the o-projection that follows pays the slow start of a small GEMM. Prefetching the o-projection's
weight during the attention, and the layer's cached K/V blocks during the qkv GEMM, uses that idle
bandwidth.

The kernels issue Hopper's bulk prefetch (`cp.async.bulk.prefetch.L2.global`, sm_90+): one thread
asks for a whole chunk, nothing is waited for and no register holds the data, so a program exits
as soon as its requests are issued. A prefetch is only a hint: it changes no value, and a line
evicted before its use is just read again from HBM.
"""

import torch
import triton
import triton.language as tl

from kernels._checks import check_kv_caches

PREFETCH_CHUNK = 32 * 1024  # bytes per bulk request
CHUNKS_PER_PROGRAM = 128  # one request per thread of a 4-warp program


def l2_prefetch_supported(device: torch.device) -> bool:
    """Bulk prefetch is a Hopper (sm_90) instruction; elsewhere the prefetches are skipped."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 9


@triton.jit
def _bulk_prefetch(addr, num_bytes):
    """Issue one bulk L2 prefetch per element: addr [BLOCK] pointers, num_bytes [BLOCK] int32 (> 0,
    multiples of 16). The dummy result keeps the asm in the program (it has side effects only)."""
    return tl.inline_asm_elementwise(
        "cp.async.bulk.prefetch.L2.global [$1], $2;\n\tmov.u32 $0, 0;",
        "=r,l,r",
        [addr, num_bytes],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _prefetch_range_kernel(base_ptr, total_bytes, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64) * CHUNK
    live = offs < total_bytes
    # Requests past the end ask for the first 16 bytes again (a bulk request cannot be masked).
    start = tl.where(live, offs, 0)
    size = tl.where(live, tl.minimum(total_bytes - offs, CHUNK), 16).to(tl.int32)
    _bulk_prefetch(base_ptr + start, size)


def prefetch_to_l2(t: torch.Tensor, num_bytes: int | None = None) -> None:
    """Prefetch a dense tensor's bytes into L2 (a column-major 2-D weight too: its storage is one range).

    num_bytes: only the first num_bytes of the storage (rounded down to 16), e.g. the first k-slices
    of a column-major weight, which every tile of a GEMM reads first."""
    base = t.t() if t.dim() == 2 and not t.is_contiguous() else t  # a column-major weight: its storage
    if not base.is_contiguous():
        raise ValueError(f"prefetch_to_l2 needs a dense tensor, got strides {t.stride()} for {tuple(t.shape)}")
    total = t.numel() * t.element_size()
    if num_bytes is not None:
        total = min(total, num_bytes)
    total = total // 16 * 16  # bulk requests come in 16-byte units; a hint may leave a tail out
    if total == 0:
        return
    grid = (triton.cdiv(triton.cdiv(total, PREFETCH_CHUNK), CHUNKS_PER_PROGRAM),)
    _prefetch_range_kernel[grid](base.view(torch.uint8).view(-1), total, CHUNK=PREFETCH_CHUNK,
                                 BLOCK=CHUNKS_PER_PROGRAM, num_warps=4)


@triton.jit
def _prefetch_kv_kernel(
    k_cache_ptr,  # [num_blocks, block_size, Hkv, D] viewed as bytes
    v_cache_ptr,
    block_tables_ptr,  # [B, max_blocks] int32
    seq_lens_ptr,  # [B] int32
    stride_bt_seq,
    block_bytes,  # bytes of one cache block (block_size * Hkv * D * element size)
    BLOCK_SIZE: tl.constexpr,  # tokens per cache block
    BLOCK: tl.constexpr,  # table entries per program
):
    seq = tl.program_id(1)
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = idx < tl.cdiv(tl.load(seq_lens_ptr + seq), BLOCK_SIZE)
    block_ids = tl.load(block_tables_ptr + seq.to(tl.int64) * stride_bt_seq + idx, mask=live, other=0)
    offs = block_ids.to(tl.int64) * block_bytes
    size = tl.where(live, block_bytes, 16).to(tl.int32)
    _bulk_prefetch(k_cache_ptr + offs, size)
    _bulk_prefetch(v_cache_ptr + offs, size)


def prefetch_kv_to_l2(k_cache: torch.Tensor, v_cache: torch.Tensor, block_tables: torch.Tensor,
                      seq_lens: torch.Tensor, max_seq_len: int) -> None:
    """Prefetch the K and V cache blocks of every sequence's first seq_lens[b] keys into L2.

    max_seq_len: host int bound on seq_lens (sizes the grid; no host sync)."""
    check_kv_caches(k_cache, v_cache)
    block_size = k_cache.shape[1]
    block_bytes = k_cache[0].numel() * k_cache.element_size()
    entries = min(triton.cdiv(max_seq_len, block_size), block_tables.shape[1])
    if seq_lens.shape[0] == 0 or entries == 0:
        return
    grid = (triton.cdiv(entries, CHUNKS_PER_PROGRAM), seq_lens.shape[0])
    _prefetch_kv_kernel[grid](k_cache.view(torch.uint8), v_cache.view(torch.uint8), block_tables, seq_lens,
                              block_tables.stride(0), block_bytes, BLOCK_SIZE=block_size,
                              BLOCK=CHUNKS_PER_PROGRAM, num_warps=4)
