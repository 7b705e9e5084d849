"""Input validation shared by the kernel launchers.

Every check reads only host-side metadata (dtype, shape, strides, device), never tensor data, so the
launchers stay free of host syncs and can be captured in CUDA graphs.

Errors: a wrong dtype raises TypeError; a wrong shape, stride, device or value raises ValueError.
"""

import functools
import os

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# The FP8 KV cache's element type (tl.float8e4nv in the kernels) and its largest finite value, where
# stores saturate: stored = e4m3(x / scale).
FP8_KV_DTYPE = torch.float8_e4m3fn
FP8_KV_MAX = 448.0
KV_CACHE_DTYPES = (*FLOAT_DTYPES, FP8_KV_DTYPE)


def interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def check_device(name: str, t: torch.Tensor, device: torch.device) -> None:
    if t.device != device:
        raise ValueError(f"{name} is on {t.device}, expected {device} (all inputs on one device)")
    if t.device.type != "cuda" and not interpreting():
        raise ValueError(
            f"{name} is on {t.device}: Triton kernels need CUDA tensors "
            "(use the *_ref functions on CPU, or set TRITON_INTERPRET=1 for testing)"
        )


def check_dtype(name: str, t: torch.Tensor, dtypes: tuple[torch.dtype, ...]) -> None:
    if t.dtype not in dtypes:
        raise TypeError(f"{name} has dtype {t.dtype}, expected one of {dtypes}")


def check_shape(name: str, t: torch.Tensor, shape: tuple[int | None, ...]) -> None:
    """`shape` entries of None accept any size in that dimension."""
    ok = t.dim() == len(shape) and all(s is None or s == d for s, d in zip(shape, t.shape))
    if not ok:
        want = tuple("*" if s is None else s for s in shape)
        raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {want}")


def check_last_dim_contiguous(name: str, t: torch.Tensor) -> None:
    if t.stride(-1) != 1:
        raise ValueError(f"{name} must have stride 1 in its last dimension, got strides {t.stride()}")


def check_contiguous(name: str, t: torch.Tensor) -> None:
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous, got strides {t.stride()} for shape {tuple(t.shape)}")


def check_kv_caches(k_cache: torch.Tensor, v_cache: torch.Tensor) -> None:
    """The engine contract: [num_blocks, block_size, num_kv_heads, head_dim], contiguous, same dtype
    (a float dtype, or e4m3 with per-layer scales: see check_kv_scales)."""
    check_dtype("k_cache", k_cache, KV_CACHE_DTYPES)
    if k_cache.dim() != 4:
        raise ValueError(
            f"k_cache must be 4-D [num_blocks, block_size, num_kv_heads, head_dim], got {tuple(k_cache.shape)}"
        )
    if v_cache.shape != k_cache.shape:
        raise ValueError(f"v_cache shape {tuple(v_cache.shape)} differs from k_cache shape {tuple(k_cache.shape)}")
    if v_cache.dtype != k_cache.dtype:
        raise TypeError(f"v_cache dtype {v_cache.dtype} differs from k_cache dtype {k_cache.dtype}")
    check_contiguous("k_cache", k_cache)
    check_contiguous("v_cache", v_cache)


def check_kv_scales(k_cache: torch.Tensor, k_scale, v_scale) -> None:
    """An e4m3 cache needs its K and V scales (fp32 tensors of one element, on the cache's device: the
    kernels load them, so a CUDA graph replays with whatever they hold); a float cache takes none."""
    if k_cache.dtype != FP8_KV_DTYPE:
        if k_scale is not None or v_scale is not None:
            raise ValueError(f"k_scale / v_scale are for an e4m3 KV cache, not a {k_cache.dtype} one")
        return
    for name, t in (("k_scale", k_scale), ("v_scale", v_scale)):
        if t is None:
            raise ValueError(f"an e4m3 KV cache needs {name} (fp32, one element)")
        check_dtype(name, t, (torch.float32,))
        if t.numel() != 1:
            raise ValueError(f"{name} must have one element, got shape {tuple(t.shape)}")
        check_device(name, t, k_cache.device)


def check_paged_attention_inputs(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    out: torch.Tensor | None,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    **metadata: torch.Tensor,
) -> None:
    """Checks shared by the paged attention launchers; `metadata` are further 1-D int32 tensors. An
    e4m3 cache is read by float queries and needs k_scale / v_scale (check_kv_scales)."""
    check_kv_caches(k_cache, v_cache)
    check_kv_scales(k_cache, k_scale, v_scale)
    num_kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
    # tl.dot tiles need a power-of-two inner dimension of at least 16.
    if head_dim < 16 or head_dim > 256 or head_dim & (head_dim - 1):
        raise ValueError(f"head_dim must be a power of two in [16, 256], got {head_dim}")
    check_dtype("q", q, FLOAT_DTYPES)
    if q.dtype != k_cache.dtype and k_cache.dtype != FP8_KV_DTYPE:
        raise TypeError(f"q dtype {q.dtype} differs from the cache dtype {k_cache.dtype}")
    check_shape("q", q, (None, None, head_dim))
    check_last_dim_contiguous("q", q)
    if q.shape[1] % num_kv_heads:
        raise ValueError(f"query heads ({q.shape[1]}) must be a multiple of kv heads ({num_kv_heads})")
    check_dtype("seq_lens", seq_lens, (torch.int32,))
    check_shape("seq_lens", seq_lens, (None,))
    check_contiguous("seq_lens", seq_lens)
    check_dtype("block_tables", block_tables, (torch.int32,))
    check_shape("block_tables", block_tables, (seq_lens.shape[0], None))
    check_last_dim_contiguous("block_tables", block_tables)
    for name, t in metadata.items():
        check_dtype(name, t, (torch.int32,))
        check_contiguous(name, t)
    tensors = {"q": q, "k_cache": k_cache, "v_cache": v_cache, "block_tables": block_tables, "seq_lens": seq_lens}
    tensors.update(metadata)
    if out is not None:
        check_dtype("out", out, (q.dtype,))
        check_shape("out", out, tuple(q.shape))
        check_last_dim_contiguous("out", out)
        tensors["out"] = out
    for name, t in tensors.items():
        check_device(name, t, q.device)


def check_window(window: int | None) -> None:
    """A sliding window is None (every key is seen) or a positive int (keys (p - window, p] of a query at p)."""
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"window must be None or a positive int, got {window!r}")


@functools.lru_cache(maxsize=None)
def num_sms(device: torch.device) -> int:
    """Streaming multiprocessors of `device` (a host-side query, no sync). CPU: a small stand-in."""
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count
