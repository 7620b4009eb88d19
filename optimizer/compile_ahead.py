"""Compile a sweep plan's kernels on the host's cores while the GPU times another plan.

Why: a sweep's checks are mostly Triton compiling each configuration for each shape it
is checked on (a new block size, a new specialisation), on the CPU, while the GPU waits;
and a sweep's timing keeps the GPU busy while the host's cores wait. Compiling the next
plan's configurations during this plan's timing overlaps the two: the next plan's checks
then find Triton's cache warm and only run.

Nothing here touches the GPU's memory or queue, so the timing beside it stays the timer's
alone: each launch compiles in Triton's warm-up mode on meta tensors
(sandbox/ahead.py, which the judged worker uses too).
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from kernelkb.kernels.base import Shape
from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import ahead

log = logging.getLogger(__name__)

def compile_config(task_name: str, dtype: str, config: dict[str, Any], shapes: list[Shape],
                   condition_shapes: list[Shape]) -> int:
    """Every launch the check of ``config`` will make, compiled and cached; returns how
    many calls of ``run`` compiled through (a call that needs values is skipped)."""
    return ahead.compile_source(task_name, dtype, get_task(task_name).render(config),
                                shapes, condition_shapes)


class CompileAhead:
    """A plan's configurations compiling in a background pool; ``stop()`` before the
    plan's own checks (what is left then is compiled by the checks themselves)."""

    def __init__(self, task: str, dtype: str, configs: list[dict[str, Any]],
                 shapes: list[Shape], condition_shapes: list[Shape], workers: int) -> None:
        log.info("%s %s: compiling %d configurations ahead in %d processes", task, dtype,
                 len(configs), workers)
        self.began = time.perf_counter()
        self.label = f"{task} {dtype}"
        self.pool = ProcessPoolExecutor(max_workers=max(1, min(workers, len(configs))),
                                        mp_context=multiprocessing.get_context("spawn"),
                                        initializer=ahead.warm_up_launches)
        self.futures: list[Future[int]] = [
            self.pool.submit(compile_config, task, dtype, c, shapes, condition_shapes)
            for c in configs]

    def stop(self) -> dict[str, Any]:
        """Cancel what has not started, wait for what has; what was done, for the log."""
        self.pool.shutdown(wait=True, cancel_futures=True)
        done = [f for f in self.futures if f.done() and not f.cancelled()]
        calls = sum(f.result() for f in done if f.exception() is None)
        summary = {"configurations": len(done), "of": len(self.futures), "calls": calls,
                   "seconds": round(time.perf_counter() - self.began, 1)}
        log.info("%s: compiled ahead %d of %d configurations (%d calls) in %.1f s",
                 self.label, len(done), len(self.futures), calls, summary["seconds"])
        return summary
