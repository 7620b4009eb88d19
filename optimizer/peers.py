"""Time each task's peers (eager, torch.compile, Liger, cuBLAS, unfused SDPA) on a GPU,
the same way the sandbox times a candidate, and pick the best trustworthy one per shape.

A peer faster than the roofline floor (the bytes or FLOPs at the measured peak, with 15%
slack because reads stream faster than the copy that measured the peak) cannot be real:
it is kept out of "best peer" (on the H200, Liger's RoPE at batch 16-32 was 3-10x under).
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from kernels.base import DTYPES, Shape, Task
from kernels.peers import peers_for
from optimizer.sandbox.timing import floor_ms, measure, rotating

log = logging.getLogger(__name__)

FLOOR_SLACK = 0.85
INPUT_SETS = 3


def trustworthy(times: dict[str, float | None], floor: float | None) -> dict[str, float]:
    """The peers' times that are possible at the GPU's peak."""
    return {name: ms for name, ms in times.items()
            if ms is not None and (floor is None or ms >= FLOOR_SLACK * floor)}


def time_peers(task: Task, dtype: str, shapes: list[Shape]) -> dict[str, dict[str, float | None]]:
    """{shape label: {peer: median ms or None when it cannot run that shape}}."""
    torch_dtype = DTYPES[dtype]
    torch._dynamo.config.cache_size_limit = 64  # one compiled graph per sweep shape
    peers = peers_for(task)
    out: dict[str, dict[str, float | None]] = {}
    for shape in shapes:
        label = task.shape_label(shape)
        sets = [task.make_inputs(shape, torch_dtype, 100 + k, "cuda") for k in range(INPUT_SETS)]
        out[label] = {}
        for name, fn in peers.items():
            try:
                out[label][name] = measure(rotating(fn, sets))[0]
            except Exception as err:  # a peer that cannot run this shape: say so, go on
                log.warning("%s %s %s: %s", task.name, label, name, repr(err)[:200])
                out[label][name] = None
    return out


def possible_peers(task: Task, dtype: str, shape: Shape, times: dict[str, float | None],
                   peaks: dict[str, Any]) -> dict[str, float]:
    """The peers' times on ``shape`` that the GPU's measured peaks allow."""
    torch_dtype = DTYPES[dtype]
    floor = floor_ms(task.bytes_moved(shape, torch_dtype), task.flops(shape, torch_dtype), peaks)
    return trustworthy(times, floor)


def best_peer(task: Task, dtype: str, shape: Shape, times: dict[str, float | None],
              peaks: dict[str, Any]) -> tuple[str, float] | None:
    """(name, ms) of the fastest peer whose time is possible, or None."""
    ok = possible_peers(task, dtype, shape, times, peaks)
    return min(ok.items(), key=lambda kv: kv[1]) if ok else None
