"""Candidate skinny GEMM (few rows x a big weight), out = x @ W^T with W in nn.Linear's [N, K] layout."""
import torch
import triton
import triton.language as tl


@triton.jit
def _skinny_kernel(x_ptr, w_ptr, out_ptr, M, N, K, stride_xm, stride_wn, stride_om,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_n = tl.program_id(0)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :]
    w_ptrs = w_ptr + offs_n.to(tl.int64)[:, None] * stride_wn + offs_k[None, :]
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for _ in range(0, K, BLOCK_K):
        x = tl.load(x_ptrs, mask=(offs_m < M)[:, None], other=0.0)
        w = tl.load(w_ptrs)
        acc += tl.dot(x, tl.trans(w))
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=(offs_m < M)[:, None])


def skinny_linear(x, w, block_n=64, block_k=128, num_warps=4, num_stages=4, out=None):
    m, k = x.shape
    n = w.shape[0]
    assert n % block_n == 0 and k % block_k == 0 and m <= 64
    if out is None:
        out = torch.empty(m, n, dtype=x.dtype, device=x.device)
    _skinny_kernel[(n // block_n,)](x, w, out, m, n, k, x.stride(0), w.stride(0), out.stride(0),
                                    BLOCK_M=64, BLOCK_N=block_n, BLOCK_K=block_k,
                                    num_warps=num_warps, num_stages=num_stages)
    return out
