"""Compile every kernel, exactly as its launcher would launch it, for sm_90 without a GPU.

Run as a script in a fresh process (the test runs it in a subprocess): the kernels must be defined
in compiled mode, so TRITON_INTERPRET is unset while `kernels` is imported, then set so that the
launchers accept CPU tensors. JITFunction.run is replaced by a function that turns the launch's
arguments into a signature and compiles it for the target (nothing runs). The interpreter accepts
some code the compiler rejects, so this catches what the CPU tests alone cannot.
"""

import os
import sys
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

import kernels  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
POINTER_TYPES = {torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float32: "*fp32"}
POINTER_TYPES.update({torch.int32: "*i32", torch.int64: "*i64", torch.float8_e4m3fn: "*fp8e4nv"})
LAUNCH_OPTIONS = ("num_warps", "num_stages")
compiled: list[str] = []


def _compile_launch(self, *args, grid, warmup, **kwargs):
    options = {k: kwargs.pop(k) for k in LAUNCH_OPTIONS if k in kwargs}
    values = dict(zip([p.name for p in self.params], args)) | kwargs
    signature, constexprs, attrs = {}, {}, {}
    for param in self.params:
        value = values[param.name]
        if param.is_constexpr:
            signature[param.name], constexprs[param.name] = "constexpr", value
        elif isinstance(value, torch.Tensor):
            signature[param.name] = POINTER_TYPES[value.dtype]
            attrs[(param.num,)] = [["tt.divisibility", 16]]
        elif isinstance(value, bool):
            signature[param.name] = "i1"
        elif isinstance(value, int):
            if value == 1:  # Triton specialises ints equal to 1 as constants
                signature[param.name], constexprs[param.name] = "constexpr", 1
                continue
            signature[param.name] = "i32" if -(2**31) <= value < 2**31 else "i64"
            if value % 16 == 0:
                attrs[(param.num,)] = [["tt.divisibility", 16]]
        elif isinstance(value, float):
            signature[param.name] = "fp32"
        else:
            raise TypeError(f"{self.__name__}: cannot type argument {param.name}={value!r}")
    triton.compile(ASTSource(self, signature, constexprs, attrs), target=TARGET, options=options)
    compiled.append(f"{self.__name__} {options}")


def _launch_all() -> None:
    """One launch per kernel variant the engine uses (Llama-3-8B and SmolLM2 shapes, bf16)."""
    bf16 = torch.bfloat16
    for num_q_heads, num_kv_heads, head_dim in ((32, 8, 128), (9, 3, 64)):
        cache = torch.zeros(64, 16, num_kv_heads, head_dim, dtype=bf16)
        tables = torch.zeros(4, 16, dtype=torch.int32)
        seq_lens = torch.ones(4, dtype=torch.int32)
        q = torch.zeros(4, num_q_heads, head_dim, dtype=bf16)
        for num_splits in (1, 8):
            kernels.paged_attention_decode(q, cache, cache, tables, seq_lens, 0.1, num_splits)
        cu = torch.arange(5, dtype=torch.int32)
        for max_q_len in (1, 4096):
            kernels.paged_attention_prefill(q, cache, cache, tables, cu, seq_lens, 0.1, max_q_len)
        # Split-KV prefill: a 50-token chat turn after a long cached prefix (8B: 64-row tiles), split
        # and unsplit, and a 128-token chunk (PrefillGraphs' largest size).
        for max_q_len, num_splits in ((50, 1), (50, 8), (128, 4)):
            kernels.paged_attention_prefill_split(q, cache, cache, tables, cu, seq_lens, 0.1, max_q_len, num_splits)
        # Sliding-window layers (Mistral, Gemma 3, EXAONE 4.0): the same kernels with the window's bounds.
        for num_splits in (1, 8):
            kernels.paged_attention_decode(q, cache, cache, tables, seq_lens, 0.1, num_splits, window=4096)
        kernels.paged_attention_prefill(q, cache, cache, tables, cu, seq_lens, 0.1, 4096, window=4096)
        for max_q_len, num_splits in ((50, 1), (50, 8)):
            kernels.paged_attention_prefill_split(q, cache, cache, tables, cu, seq_lens, 0.1, max_q_len, num_splits,
                                                  window=4096)
        key = torch.zeros(4, num_kv_heads, head_dim, dtype=bf16)
        kernels.apply_rotary(q, key, torch.zeros(4, dtype=torch.int64), torch.zeros(8, head_dim))
        kernels.apply_rotary_and_write_kv(q, key, key, torch.zeros(4, dtype=torch.int64), torch.zeros(8, head_dim),
                                          cache, cache, torch.zeros(4, dtype=torch.int64))
        # An e4m3 KV cache (kv_cache_dtype="fp8"): the write and every attention kernel with the scales.
        fp8 = torch.zeros(64, 16, num_kv_heads, head_dim, dtype=torch.float8_e4m3fn)
        scales = dict(k_scale=torch.ones(1), v_scale=torch.ones(1))
        for num_splits in (1, 8):
            kernels.paged_attention_decode(q, fp8, fp8, tables, seq_lens, 0.1, num_splits, **scales)
        kernels.paged_attention_prefill(q, fp8, fp8, tables, cu, seq_lens, 0.1, 4096, **scales)
        for max_q_len, num_splits in ((50, 1), (50, 8)):
            kernels.paged_attention_prefill_split(q, fp8, fp8, tables, cu, seq_lens, 0.1, max_q_len, num_splits,
                                                  **scales)
        kernels.apply_rotary_and_write_kv(q, key, key, torch.zeros(4, dtype=torch.int64), torch.zeros(8, head_dim),
                                          fp8, fp8, torch.zeros(4, dtype=torch.int64), scales["k_scale"],
                                          scales["v_scale"])
    x = torch.zeros(4, 4096, dtype=bf16)
    kernels.silu_and_mul(torch.zeros(4, 2 * 14336, dtype=bf16))
    kernels.silu_and_mul(torch.zeros(4, 2 * 1536, dtype=bf16))
    kernels.rms_norm(x, x[0], 1e-5)
    kernels.rms_norm(x, x[0], 1e-5, x)
    i64, i32 = torch.int64, torch.int32
    # Qwen3-30B-A3B's experts (128 of width 768 over 2048, 8 per token): two grouped GEMMs and the activation.
    tokens = torch.zeros(4, 2048, dtype=bf16)
    kernels.fused_moe(tokens, torch.zeros(128, 2 * 768, 2048, dtype=bf16), torch.zeros(128, 2048, 768, dtype=bf16),
                      torch.zeros(4, 8, dtype=bf16), torch.arange(32, dtype=i64).view(4, 8))
    kernels.unpack_step_row(torch.zeros(128 + 3 + 144, dtype=i64), torch.zeros(64, dtype=i64), torch.zeros(64, dtype=i64),
                            torch.zeros(1, dtype=i32), torch.zeros(2, dtype=i32), torch.zeros(144, dtype=i32),
                            torch.zeros(1, dtype=i64), 128, 16)


def main() -> None:
    JITFunction.run = _compile_launch
    os.environ["TRITON_INTERPRET"] = "1"  # only so the launchers' device checks accept CPU tensors
    _launch_all()
    print(f"compiled {len(compiled)} kernel variants for {TARGET}")


if __name__ == "__main__":
    main()
