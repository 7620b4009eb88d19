"""The rules read from a candidate's source before any of it runs, as one verdict.

Why: the judge's worker refuses a source on them, and the shipped seeds must hold no
code the judge would refuse: one place says which rules a source meets and what kind of
failure breaking each is.
"""

from __future__ import annotations

import math

import torch

from kernelkb.kernels.base import Task
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.optimizer.sandbox import imports, named_compute, tensor_flow


def refused(source: str, task: Task | None = None) -> tuple[str, str] | None:
    """(error kind, message) for the first rule the source breaks, or None. ``task``
    says which of run()'s arguments are tensors and whether it takes precomputed
    factors; without one, run()'s arguments with no default are taken as tensors."""
    named = imports.problems(source)
    if named:
        return "cheat_tamper", imports.message(named)
    computed = named_compute.problems(source, bool(task and task.torch_constants),
                                      tensor_args(task) if task else None)
    if computed:
        return "torch_compute", named_compute.message(computed)
    kept = tensor_flow.kept_returns_in(source)
    if kept:
        return "cheat_aliasing", ("what run() returns must be allocated in the call: a "
                                  "buffer kept in the module and handed out again is "
                                  "overwritten under a caller still holding it; refused on "
                                  "every path, taken or not: " + "; ".join(kept[:3]))
    return None


def tensor_args(task: Task) -> tuple[bool, ...]:
    """Which of run()'s arguments are tensors: the task's inputs on its smallest CPU
    shape (attention's cache length is an int), then its scalar arguments (RMSNorm's eps)."""
    if task.name not in _TENSOR_ARGS:
        _TENSOR_ARGS[task.name] = _drawn(task)
    return _TENSOR_ARGS[task.name]


_TENSOR_ARGS: dict[str, tuple[bool, ...]] = {}  # per task name (a Task is not hashable)


def _drawn(task: Task) -> tuple[bool, ...]:
    shape = min(task.cpu_shapes, key=math.prod)
    inputs = task.make_inputs(shape, DTYPES[task.dtypes[0]], 0, "cpu")
    return (*(isinstance(v, torch.Tensor) for v in inputs), *(False for _ in task.scalar_args))
