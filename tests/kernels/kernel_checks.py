"""Assertions shared by the kernel task tests (tests/kernels/test_<task>.py).

``assert_verbose_allclose`` says *how* two tensors differ (mismatch count and share, the
first offending indices with both values, max abs / rel error), because "not close" alone
tells a kernel author nothing. ``assert_task_close`` applies a task's per-dtype tolerance,
including the systematic-bias check, to a whole result (tensor or tuple of tensors).
``check_config`` renders, loads, runs and checks one point of a task's search space.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import torch

from kernelkb.kernels.base import Shape, Task
from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.optimizer.sandbox import provenance

# bytes moved (fp16) past which the CPU interpreter spends seconds per run of a shape
INTERPRETER_HEAVY_BYTES = 1_000_000


def naive_cases(task: Task) -> list[tuple[Shape, str]]:
    """(shape, dtype) pairs of a task's naive-kernel test: every edge and cpu shape in
    every dtype, except that on the CPU interpreter a heavy shape runs in the task's first
    dtype only (each dtype's path is checked on the lighter shapes; softmax's 1823x781 took
    9-10 s a dtype)."""
    on_gpu = torch.cuda.is_available()
    return [(shape, dtype) for shape in (*task.edge_shapes, *task.cpu_shapes)
            for dtype in task.dtypes
            if on_gpu or dtype == task.dtypes[0]
            or task.bytes_moved(shape, torch.float16) <= INTERPRETER_HEAVY_BYTES]


def _mismatch_report(
    actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float, max_report: int
) -> str | None:
    """None if close; otherwise a multi-line description of where and how they differ."""
    a = actual.detach().float().cpu()
    e = expected.detach().float().cpu()
    diff = (a - e).abs()
    bad = ~(diff <= atol + rtol * e.abs())  # ~(<=) also flags NaN on either side
    both_nan = torch.isnan(a) & torch.isnan(e)
    both_same_inf = torch.isinf(a) & torch.isinf(e) & (a == e)
    bad &= ~(both_nan | both_same_inf)
    n_bad = int(bad.sum())
    if n_bad == 0:
        return None
    finite = torch.isfinite(diff)
    max_abs = float(diff[finite].max()) if finite.any() else float("nan")
    rel = diff / e.abs().clamp_min(1e-12)
    max_rel = float(rel[finite].max()) if finite.any() else float("nan")
    lines = [
        f"{n_bad} of {bad.numel()} elements differ ({n_bad / bad.numel():.2%}) "
        f"with atol={atol:g}, rtol={rtol:g}; max abs err {max_abs:.3g}, max rel err {max_rel:.3g}",
        f"non-finite: actual {int((~torch.isfinite(a)).sum())}, "
        f"expected {int((~torch.isfinite(e)).sum())}",
        "first mismatches (index: actual vs expected):",
    ]
    for index in bad.nonzero()[:max_report].tolist():
        idx = tuple(index)
        lines.append(f"  {idx}: {a[idx].item():.6g} vs {e[idx].item():.6g}")
    return "\n".join(lines)


def assert_verbose_allclose(
    actual: torch.Tensor,
    expected: torch.Tensor,
    *,
    atol: float,
    rtol: float,
    max_report: int = 5,
    label: str = "",
) -> None:
    """Like torch.testing.assert_close, but the failure names counts and first indices."""
    prefix = f"{label}: " if label else ""
    if actual.shape != expected.shape:
        raise AssertionError(f"{prefix}shape {tuple(actual.shape)} != {tuple(expected.shape)}")
    report = _mismatch_report(actual, expected, atol, rtol, max_report)
    if report is not None:
        raise AssertionError(prefix + report)


def relative_bias(actual: torch.Tensor, expected: torch.Tensor, atol: float = 0.0) -> float:
    """|mean signed error| / max(mean |expected|, atol): a drift that stays under the
    elementwise tolerance (the evaluator's rule, ``optimizer.sandbox.checks``)."""
    a = actual.detach().double().cpu()
    e = expected.detach().double().cpu()
    finite = torch.isfinite(a) & torch.isfinite(e)
    if not finite.any():
        return 0.0
    err = (a - e)[finite].mean().abs()
    scale = max(float(e[finite].abs().mean()), atol)
    return float(err / scale) if scale > 0 else float(err)


def _as_tensors(result: Any) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, Sequence):
        return list(result)
    raise TypeError(f"expected a tensor or a sequence of tensors, got {type(result).__name__}")


def assert_task_close(
    task: Task, dtype_name: str, actual: Any, expected: Any, *, label: str = ""
) -> None:
    """Check a kernel result against the reference with the task's tolerance for a dtype."""
    tol = task.tolerances[dtype_name]
    outs, refs = _as_tensors(actual), _as_tensors(expected)
    if len(outs) != len(refs):
        raise AssertionError(f"{label}: {len(outs)} outputs, reference has {len(refs)}")
    for i, (out, ref) in enumerate(zip(outs, refs, strict=True)):
        where = f"{label} output {i}" if len(outs) > 1 else label
        if out.dtype != ref.dtype:
            raise AssertionError(f"{where}: dtype {out.dtype} != reference {ref.dtype}")
        assert_verbose_allclose(out, ref, atol=tol.atol, rtol=tol.rtol, label=where)
        bias = relative_bias(out, ref, tol.atol)
        if bias > tol.max_bias:
            raise AssertionError(f"{where}: systematic bias {bias:.3g} > max_bias {tol.max_bias:g}")


@functools.lru_cache(maxsize=512)
def _load_source(source: str) -> ModuleType:
    return load_candidate(source)


def candidate_for(task: Task, config: Mapping[str, Any] | None = None) -> ModuleType:
    """The loaded candidate module for a config (default: the naive kernel), cached."""
    return _load_source(task.render(dict(config or {})))


def run_tracked(task: Task, module: ModuleType, inputs: list[Any], label: str) -> Any:
    """``module.run(*inputs)``, asserting the evaluator's Triton-only rule held."""
    tracker = provenance.install(module.__file__, task.torch_constants)
    with tracker.call(inputs):
        actual = module.run(*inputs)
    written = [inputs[i] for i in task.mutated_inputs]
    problem = tracker.violation(_as_tensors(actual), written)
    assert problem is None, f"{label}: {problem}"
    return actual


def check_config(
    task: Task,
    config: Mapping[str, Any] | None,
    shape: Shape,
    dtype_name: str,
    *,
    seed: int,
    device: str,
) -> None:
    """Run one config of a task on one shape and dtype, and assert it matches the reference
    and keeps the evaluator's Triton-only rule (optimizer/sandbox/provenance.py)."""
    module = candidate_for(task, config)
    inputs = list(task.make_inputs(shape, DTYPES[dtype_name], seed, device))
    label = f"{task.name} {task.shape_label(shape)} {dtype_name} config={dict(config or {})}"
    actual = run_tracked(task, module, inputs, label)
    expected = task.reference(*[x.clone() if isinstance(x, torch.Tensor) else x
                                for x in task.make_inputs(shape, DTYPES[dtype_name], seed,
                                                          device)])
    assert_task_close(task, dtype_name, actual, expected, label=label)
