"""Programmatic dependent launch (PDL, sm_90+): a kernel's programs start while the kernel before it ends.

A chat turn or a decode step is ~10 kernels per layer, most of them a few µs long, so the gap
between one kernel's last program and the next one's first (launch, scheduling, prologue) is a
visible share of the step. Launched with PDL, a kernel is scheduled as soon as every program of the
kernel before it has called `launch_dependents` (or finished); its programs then wait in
`griddepcontrol.wait` until that kernel has completed and its writes are visible.

Every kernel launched with PDL calls `wait_for_prior_kernel` first, before any load, store or early
return: then a kernel never completes before the one it follows, so the order of every pair of
kernels in the stream still holds, and nothing is read or overwritten early. Only the launch overlaps.
A kernel launched after a non-PDL one (a cuBLAS GEMM, a torch op) starts when that one completes, as
without PDL.

PAGODA_PDL=0 turns it off (for measuring; the results are the same either way).
"""

import functools
import os

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from kernels._checks import interpreting


def enabled(device: torch.device) -> bool:
    """Launch with PDL: a CUDA device of compute capability 9.0 or later, not the interpreter."""
    if device.type != "cuda" or interpreting() or os.environ.get("PAGODA_PDL", "1") == "0":
        return False
    return _capability_major(device.index if device.index is not None else torch.cuda.current_device()) >= 9


@functools.cache
def _capability_major(index: int) -> int:
    return torch.cuda.get_device_capability(index)[0]


@triton.jit
def wait_for_prior_kernel(USE_PDL: tl.constexpr):
    """The first statement of a kernel launched with `launch_pdl=USE_PDL`: wait until the kernel
    before it has completed, then let the kernel after it be scheduled."""
    if USE_PDL:
        gdc_wait()
        gdc_launch_dependents()
