"""Catch a candidate that ignores stream order (GPU only).

A kernel launched on a side stream without waiting for the current one reads inputs
before they are ready, and one that does not join back lets the benchmark clock stop
early. The check: poison the inputs, park the current stream in a ~20 ms sleep, write
the real inputs behind it (stream-ordered), then call the candidate. Work on the
current stream sees the real inputs; work on another stream runs during the sleep and
reads the poison, so its output is wrong. The caller compares it with the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

SLEEP_CYCLES = 40_000_000  # ~20 ms at ~2 GHz: far longer than any launch


def run_behind_busy_stream(run: Callable[..., Any], inputs: Sequence[Any],
                           fresh: Sequence[Any]) -> Any:
    """Call ``run(*inputs)`` with ``fresh`` values arriving in ``inputs`` only in stream
    order; returns the output after a full device synchronise."""
    torch.cuda.synchronize()
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            x.fill_(float("nan"))
        elif isinstance(x, torch.Tensor):
            x.fill_(0)
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)
    for x, f in zip(inputs, fresh, strict=True):
        if isinstance(x, torch.Tensor):
            x.copy_(f)
    out = run(*inputs)
    torch.cuda.synchronize()
    return out
