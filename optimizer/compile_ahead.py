"""Compile a sweep plan's kernels on the host's cores while the GPU times another plan.

Why: a sweep's checks are mostly Triton compiling each configuration for each shape it
is checked on (a new block size, a new specialisation), on the CPU, while the GPU waits;
and a sweep's timing keeps the GPU busy while the host's cores wait. Compiling the next
plan's configurations during this plan's timing overlaps the two: the next plan's checks
then find Triton's cache warm and only run.

Nothing here touches the GPU's memory or queue, so the timing beside it stays the timer's
alone: each launch of a configuration's ``run`` compiles in Triton's warm-up mode (the
kernel is built and cached, never launched) on meta tensors (sizes, strides and dtypes,
no memory). A wrapper that reads values (``.item()``) compiles nothing ahead here; its
check compiles it as before. Under the CPU interpreter nothing is compiled, so nothing
is done.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import time
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from kernelkb.kernels.base import Shape
from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.dtypes import DTYPES

log = logging.getLogger(__name__)

_INPUTS: dict[tuple[str, str, Shape, str], tuple[Any, ...]] = {}  # a pool process's, by shape


def _warm_up_launches() -> None:
    """A pool process: every ``kernel[grid](...)`` compiles and returns, launching nothing;
    a wrapper asking the properties of its input's device (a persistent kernel's SM
    count) gets the GPU's, not an error for the meta device."""
    import torch
    from triton.runtime.jit import KernelInterface

    def compile_only(self: Any, grid: Any) -> Any:
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=True, **kwargs)

    properties = torch.cuda.get_device_properties

    def of_the_gpu(device: Any = None) -> Any:
        meta = device == "meta" or getattr(device, "type", None) == "meta"
        return properties(None if meta else device)

    KernelInterface.__getitem__ = compile_only  # type: ignore[method-assign]
    torch.cuda.get_device_properties = of_the_gpu  # type: ignore[assignment]
    logging.basicConfig(level=logging.WARNING)


def _meta(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype,
                                   device="meta")
    return value


@contextlib.contextmanager
def _meta_generators() -> Iterator[None]:
    """``torch.Generator(device="meta")`` as a CPU generator: a task's ``make_inputs``
    seeds one on its device, which the meta device has not, and meta tensors ignore it."""
    import torch

    real = torch.Generator

    class Generator:  # a class, not a function: annotations write `torch.Generator | None`
        def __new__(cls, device: Any = "cpu") -> Any:
            return real(device="cpu" if str(device) == "meta" else device)

    torch.Generator = Generator  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        torch.Generator = real  # type: ignore[misc]


def _made(task_name: str, dtype: str, shape: Shape, condition: str, device: str
          ) -> tuple[Any, ...]:
    task = get_task(task_name)
    base = task.make_inputs(shape, DTYPES[dtype], 0, device)
    if condition == "plain":
        return tuple(base)
    return tuple(next(c.apply(base, 0) for c in task.input_conditions if c.name == condition))


def _inputs(task_name: str, dtype: str, shape: Shape, condition: str) -> tuple[Any, ...]:
    """The check's inputs for ``shape`` under ``condition`` ("plain" or a condition's
    name) as meta tensors (sizes and strides are what a compile reads), made on the meta
    device (no memory, no time); where a condition needs values, made on the CPU once
    per pool process and then described."""
    wanted = (task_name, dtype, shape, condition)
    if wanted not in _INPUTS:
        try:
            with _meta_generators():
                _INPUTS[wanted] = _made(task_name, dtype, shape, condition, "meta")
        except Exception:  # noqa: BLE001 - the condition reads values: make them
            _INPUTS[wanted] = tuple(_meta(x) for x in
                                    _made(task_name, dtype, shape, condition, "cpu"))
    return _INPUTS[wanted]


def compile_config(task_name: str, dtype: str, config: dict[str, Any], shapes: list[Shape],
                   condition_shapes: list[Shape]) -> int:
    """Every launch the check of ``config`` will make, compiled and cached; returns how
    many calls of ``run`` compiled through (a call that needs values is skipped)."""
    task = get_task(task_name)
    try:
        module = load_candidate(task.render(config), "sweep_ahead")
    except Exception:  # noqa: BLE001 - the check says what is wrong with it
        return 0
    through = 0
    for shape in shapes:
        cases = ["plain"]
        if shape in condition_shapes:
            cases += [c.name for c in task.input_conditions]
        for case in cases:
            try:
                module.run(*_inputs(task_name, dtype, shape, case))
                through += 1
            except Exception:  # noqa: BLE001, S112 - values needed: the check compiles it
                continue
    return through


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
                                        initializer=_warm_up_launches)
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
