"""GPU time from the GPU's own timestamps: every kernel the process ran, on every stream.

Why: the figures verdicts use (compare.py) come from CUDA events on the current stream.
Work a candidate puts on a side stream it never joins back runs after the second event,
so the events bracket nothing; a lazy mode or a clock the candidate swapped changes them
too. CUPTI, read through ``torch.profiler``, records each kernel's start and end as the
GPU ran it, whatever stream launched it. The busy time per call (the union of the kernels'
intervals, so overlapping streams are not counted twice) is a floor the reported GPU time
must clear: a figure far under it was not the candidate's work.

The same timestamps name every kernel. A candidate that is honest when checked and hands
the work to PyTorch when timed (it can tell the two apart many ways: the dispatch mode on
the stack or not, calls coming back to back) launches the same Triton kernels both
times, so the launch counts cannot see it; the kernel names can: under the clock run()
may run its own Triton kernels and copies or fills, not a library's compute kernels.

Imports only torch (the sandbox's rule: it runs on a bare GPU host).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

log = logging.getLogger("kernelkb.optimizer.sandbox.kernel_clock")

PROFILED_CALLS = 10  # per shape; one profiler session for all of them
UNDER_SHARE = 0.6  # a reported GPU time under this share of the busy time is a lie
# kernels that place values and compute none (the allocation and movement ops the
# Triton-only rule allows: fills, copies, casts, cat, flip, roll), matched in lower case
MOVEMENT_KERNELS = ("copy", "fill", "catarray", "memcpy", "memset", "flip", "roll")
# what a library's compute kernel is called: ATen's, cuBLAS / cuBLASLt / CUTLASS GEMMs,
# cuDNN, flash attention, inductor's generated Triton kernels, jiterator's
LIBRARY_KERNELS = ("at::", "cutlass", "cublas", "cudnn", "gemm", "xmma", "nvjet", "flash",
                   "triton_poi_", "triton_red_", "triton_per_", "triton_tem_", "jitted")


@dataclass(frozen=True)
class Reading:
    busy_ms: float  # per call: the union of the kernels' intervals
    kernels: frozenset[str]  # the names of every kernel that ran


def read(call: Callable[[], Any], calls: int = PROFILED_CALLS) -> Reading | None:
    """The busy time per call and the kernels' names, from one profiler session over
    ``calls`` calls; None where the profiler gives no device events here (no CUPTI on
    this host, or a jail that refuses it)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                call()
            torch.cuda.synchronize()
        events = prof.events()
    except Exception as err:  # noqa: BLE001 - a missing CUPTI leaves the other clocks
        log.warning("no GPU timestamps here (%s: %s)", type(err).__name__, err)
        return None
    device = [e for e in events
              if e.device_type == DeviceType.CUDA and e.time_range.end > e.time_range.start]
    spans = sorted((e.time_range.start, e.time_range.end) for e in device)
    if not spans:
        return None
    return Reading(busy_ms=union_length(spans) / 1e3 / calls,
                   kernels=frozenset(e.name for e in device))


def foreign_kernels(names: Iterable[str], own: Iterable[str]) -> list[str]:
    """The names that are a library's compute kernels: not one of the candidate's Triton
    kernels (``own``: a Triton kernel runs under its function's name, which has neither
    a space nor '::'), not a copy or fill. A name of neither kind is let be."""
    mine = set(own)
    return sorted(n for n in names
                  if not (n in mine or (" " not in n and "::" not in n
                                        and any(n.startswith(o) for o in mine)))
                  and not any(m in n.lower() for m in MOVEMENT_KERNELS)
                  and any(lib in n for lib in LIBRARY_KERNELS))


def union_length(spans: list[tuple[float, float]]) -> float:
    """Total length covered by sorted (start, end) intervals."""
    total, (start, end) = 0.0, spans[0]
    for s, e in spans[1:]:
        if s > end:
            total += end - start
            start, end = s, e
        else:
            end = max(end, e)
    return total + end - start


def under_busy_time(reported_ms: float, busy_ms: float | None) -> bool:
    """A reported GPU time the GPU's own timestamps contradict."""
    return busy_ms is not None and reported_ms < UNDER_SHARE * busy_ms


def clears_stream_clock(stream_ms: float, busy_ms: float | None) -> bool:
    """Whether the GPU's own timestamps clear a call whose device-synchronised time read
    far over its stream-clock figure: this process's kernels, on every stream, fit the
    figure. The synchronised time also waits out other processes' work on a shared GPU;
    the timestamps see only this process's kernels."""
    return busy_ms is not None and stream_ms >= UNDER_SHARE * busy_ms
