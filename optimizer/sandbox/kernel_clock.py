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

Two readers of the same timestamps: NVIDIA's CUPTI bindings (PyPI ``cupti-python``),
enabling kernel, copy and fill records only, and ``torch.profiler``, whose first session
in a process enables far more (API callbacks, runtime and driver records) and costs
seconds on an H200 host (``benchmarks/cupti_start.py``). The worker is a fresh process
per evaluation, so that first session is paid on every evaluation that reads the clock.
``KERNELKB_GPU_TIMESTAMPS`` picks one (``auto``: the bindings where installed).

Imports only torch, and the CUPTI bindings where present (the sandbox's rule: it runs on
a bare GPU host).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

try:  # imported with the harness, before the candidate could plant a module of the name
    from cupti import cupti as _cupti
except Exception:  # noqa: BLE001 - not installed, or no CUDA driver: the profiler reads
    _cupti = None

log = logging.getLogger("kernelkb.optimizer.sandbox.kernel_clock")
_demangle = torch._C._demangle  # CUPTI names C++ kernels mangled; the profiler does not

READERS = ("auto", "cupti", "profiler")  # KERNELKB_GPU_TIMESTAMPS

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
    reader: str = "profiler"  # which reader took it: "cupti" or "profiler"
    # per call: CUDA events around each of the same calls, on the current stream. Another
    # process on the GPU stretches a kernel's span and its events alike, so only this
    # figure, read in the same calls, may call the spans a lie (see hides_work)
    bracketed_ms: float | None = None


Span = tuple[float, float, str]  # start and end in ms on the GPU's clock, the name


def reader_for(preference: str = "auto") -> str:
    """The reader a preference names: ``auto`` is the CUPTI bindings where importable."""
    if preference not in READERS:
        raise ValueError(f"KERNELKB_GPU_TIMESTAMPS={preference!r}: one of {', '.join(READERS)}")
    if preference == "auto":
        return "cupti" if _cupti is not None else "profiler"
    return preference


def preference() -> str:
    """``KERNELKB_GPU_TIMESTAMPS`` (default ``auto``), checked in the evaluator's process:
    the worker does not see ``KERNELKB_*`` settings, so it travels in the request."""
    value = os.environ.get("KERNELKB_GPU_TIMESTAMPS", "").strip() or "auto"
    reader_for(value)  # a bad value is the caller's error, raised here
    return value


def read(call: Callable[[], Any], calls: int = PROFILED_CALLS,
         reader: str = "auto") -> Reading | None:
    """The busy time per call and the kernels' names, from one session over ``calls``
    calls; None where no reader gives device records here (no CUPTI on this host, or a
    jail that refuses it). A reader that fails hands over to the profiler."""
    call()
    torch.cuda.synchronize()
    chosen = reader_for(reader)
    spans: list[Span] | None = None
    brackets: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
    call = _bracketed(call, brackets)
    if chosen == "cupti":
        try:
            spans = _cupti_spans(call, calls)
        except Exception as err:  # noqa: BLE001 - e.g. no bindings: the profiler reads
            log.warning("CUPTI bindings gave no records (%s: %s); reading through "
                        "torch.profiler", type(err).__name__, err)
            chosen = "profiler"
    if chosen == "profiler":
        brackets.clear()
        try:
            spans = _profiler_spans(call, calls)
        except Exception as err:  # noqa: BLE001 - a missing CUPTI leaves the other clocks
            log.warning("no GPU timestamps here (%s: %s)", type(err).__name__, err)
            return None
    if not spans:
        return None
    bracketed = sum(a.elapsed_time(b) for a, b in brackets) / len(brackets) if brackets \
        else None
    return Reading(busy_ms=union_length(sorted((s, e) for s, e, _ in spans)) / calls,
                   kernels=frozenset(name for _, _, name in spans), reader=chosen,
                   bracketed_ms=bracketed)


def _bracketed(call: Callable[[], Any], brackets: list[tuple[torch.cuda.Event, torch.cuda.Event]]
               ) -> Callable[[], Any]:
    """``call`` with CUDA events recorded around it (on the current stream) each time."""
    def inner() -> Any:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = call()
        end.record()
        brackets.append((start, end))
        return out
    return inner


def _profiler_spans(call: Callable[[], Any], calls: int) -> list[Span]:
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    return [(e.time_range.start / 1e3, e.time_range.end / 1e3, e.name) for e in prof.events()
            if e.device_type == DeviceType.CUDA and e.time_range.end > e.time_range.start]


# the records read, by kind: a kernel carries its name, a copy or fill is named here
# (movement, as MOVEMENT_KERNELS says); records land in _cupti_records on the flush
_CUPTI_KINDS = {"CONCURRENT_KERNEL": "", "MEMCPY": "Memcpy", "MEMSET": "Memset"}
_cupti_records: list[Span] = []
_cupti_names: dict[int, str] = {}  # kind number -> the name above, set on first use


def _cupti_completed(activities: list[Any]) -> None:
    """CUPTI hands back a filled buffer (on the forced flush, in the flushing thread)."""
    for a in activities:
        if a.end > a.start:
            name = getattr(a, "name", None) or _cupti_names.get(int(a.kind), "unknown")
            _cupti_records.append((a.start / 1e6, a.end / 1e6, str(name)))


def _cupti_spans(call: Callable[[], Any], calls: int) -> list[Span]:
    if _cupti is None:
        raise RuntimeError("the CUPTI bindings (PyPI cupti-python) are not installed")
    if not _cupti_names:  # the first session in this process: register the buffers
        _cupti_names.update({int(getattr(_cupti.ActivityKind, k)): n
                             for k, n in _CUPTI_KINDS.items()})
        _cupti.activity_register_callbacks(lambda: (8 << 20, 0), _cupti_completed)
    kinds = list(_cupti_names)
    _cupti_records.clear()
    for kind in kinds:
        _cupti.activity_enable(kind)
    try:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    finally:
        for kind in kinds:
            _cupti.activity_disable(kind)
        _cupti.activity_flush_all(1)
    names = {n: _demangle(n) for n in {n for _, _, n in _cupti_records}}
    return [(s, e, names[n]) for s, e, n in _cupti_records]


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


def under_busy_time(reported_ms: float | None, busy_ms: float | None) -> bool:
    """A reported GPU time the GPU's own timestamps contradict."""
    return busy_ms is not None and reported_ms is not None and reported_ms < UNDER_SHARE * busy_ms


def hides_work(reading: Reading | None) -> bool:
    """Whether the GPU was busy with this process's kernels far longer than the events
    around the same calls saw: work on a stream the events do not bracket. Read in the
    same calls, a neighbour on the GPU stretches both alike and cannot fire this."""
    return reading is not None and under_busy_time(reading.bracketed_ms, reading.busy_ms)


def clears_stream_clock(stream_ms: float, busy_ms: float | None) -> bool:
    """Whether the GPU's own timestamps clear a call whose device-synchronised time read
    far over its stream-clock figure: this process's kernels, on every stream, fit the
    figure. The synchronised time also waits out other processes' work on a shared GPU;
    the timestamps see only this process's kernels."""
    return busy_ms is not None and stream_ms >= UNDER_SHARE * busy_ms
