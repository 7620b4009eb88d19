"""``evaluate``: one candidate in, layered feedback out; ``measure_baseline`` for the
reference. Runs the worker subprocess, then adds what needs the parent's view: speedups
against the baseline and the parent, roofline figures, the hint and the agent text.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import time
from typing import Any

import torch

from kernelkb.kernels.base import Shape, Task
from kernelkb.kernels.config import header_constants
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.shared.comparison import Comparison
from kernelkb.kernels.shared.hashing import source_hash
from kernelkb.kernels.shared.stats import geomean
from kernelkb.kernels.shared.text import inert
from kernelkb.kernels.shared.vocabulary import Verdict
from kernelkb.optimizer.sandbox import (
    ahead,
    compare,
    feedback,
    interpreter_pass,
    kernel_clock,
    neighbours,
    regressions,
    trusted_cache,
)
from kernelkb.optimizer.sandbox.hardware import detect_environment
from kernelkb.optimizer.sandbox.result import Baseline, EvalResult
from kernelkb.optimizer.sandbox.runner import run_worker, trusted_layer

log = logging.getLogger(__name__)


def resolve_shapes(task: Task, shapes: str | list[tuple[int, ...]], on_gpu: bool
                   ) -> tuple[str, list[Shape]]:
    """(shape set name, shapes). "auto": cpu + edge on the interpreter, tune on a GPU."""
    if isinstance(shapes, str):
        if shapes == "auto":
            if on_gpu:  # edge + representative sweep shapes; runs end with a full sweep
                return "tune", list(task.shapes("tune"))
            return "cpu+edge", [*task.cpu_shapes, *task.edge_shapes]
        named = ("sweep", "edge", "cpu", "all", "representative", "tune")
        if shapes not in named:
            raise ValueError(f"unknown shape set {shapes!r}: auto or one of {named}")
        return shapes, list(task.shapes(shapes))
    resolved = [tuple(int(v) for v in s) for s in shapes]
    if not resolved:
        raise ValueError("no shapes given")
    for shape in resolved:
        if len(shape) != len(task.shape_names):
            raise ValueError(f"shape {shape} does not match {task.shape_names}")
    return "custom", resolved


REACH_CPU_S = 40.0  # the judge's reach under the interpreter, generously (see below)


def work_timeout_s(shapes: int, seeds: int, *, on_gpu: bool) -> float:
    """Wall seconds one evaluation may need: start and compile, then per shape its checks
    (seeds, the counterfactual, stream order) and on a GPU its timing, then the
    comparison's cap, and one shape more for the judge's own (the shape past the largest
    asked, the other dtypes), and its reach (kernels/reach.py: 10-60 s a naive kernel
    under the interpreter). Generous on purpose: a timeout is a failure, so it must only
    catch kernels that hang or crawl."""
    per_shape = 2.0 * (seeds + 2) + (8.0 if on_gpu else 0.0)
    reach = 10.0 if on_gpu else REACH_CPU_S
    return 60.0 + reach + (shapes + 1) * per_shape + (2 * compare.TIME_CAP_S if on_gpu else 0.0)


def sweep_shape_set(shapes: str | list[tuple[int, ...]], on_gpu: bool
                    ) -> str | list[tuple[int, ...]]:
    """The final sweep's shape set: "auto" is every shape on a GPU ("all") and the
    interpreter's own ("cpu" + "edge") on a CPU, where GPU-sized shapes (4096 x 4096) run
    for minutes and time out; any other set as given."""
    if shapes == "auto":
        return "all" if on_gpu else "auto"
    return shapes


def evaluate(task_name: str, source: str, *, dtype: str = "float16",
             shapes: str | list[tuple[int, ...]] = "auto", parent: EvalResult | None = None,
             baseline: Baseline | None = None, seeds: int = 3, timeout_s: float | None = None,
             mem_limit_mb: int | None = None, timing: bool | None = None,
             peaks: dict[str, float] | None = None,
             parent_source: str | None = None, settle_s: float = 3.0,
             conditions: bool = True, refuse_introspection: bool = True,
             refuse_surroundings: bool = True, refuse_imports: bool = True,
             property_examples: int | None = None,
             wide_offsets: tuple[tuple[int, ...], int] | None = None,
             far_rows: int | None = None, narrow_addresses: bool = False,
             reach: tuple[int, ...] | None = None,
             reach_rows_from: int | None = None) -> EvalResult:
    """Evaluate one candidate in a sandboxed subprocess; never raises for candidate faults.

    ``parent_source``: the incumbent; on a GPU the candidate is timed against it,
    interleaved in the same worker (compare.py), and the verdict reads that comparison.
    ``timeout_s``: the wall-clock limit (None: what the shapes need, ``work_timeout_s``;
    a fixed 60 s timed out the naive softmax judged on a cold cache on an H100).
    ``settle_s``: how long the worker may spend bringing the GPU to a steady state.
    ``conditions``: check the task's input conditions too (False: the plain draw only).
    ``refuse_introspection``: the candidate may not reach frames, gc, code objects or
    ctypes (introspection.py); False only to test that the layers behind that rule (the
    tamper check, the launch counts, the judge) each hold alone.
    ``refuse_surroundings``: the candidate may not read the clock, its process, files or
    the environment (surroundings.py); False only to test that the jail holds alone.
    ``refuse_imports``: the candidate's source names only what a wrapper needs (an
    allow-list, imports.py); False only to test that the layers behind it hold alone.
    ``property_examples``: cases the judge draws over the task's whole bounds
    (properties.py; None: a few); the task's kept failing cases are asked first, and a
    new one found is kept (regressions.py).
    ``wide_offsets``: a shape and an element count: the judge compares the rows holding
    elements past that count (wide_offsets.py; None: the task's ``wide_shape`` past
    2**31, on a GPU only).
    ``far_rows``: an element count: the judge lays each input's leading dimensions out
    with their entries about that far apart, on the shapes asked (kernels/far_rows.py;
    None: 2**31 on the task's listed shapes, on a GPU only).
    ``narrow_addresses``: under the CPU interpreter too, refuse a kernel whose address
    offsets may wrap in 32 bits (a product of two run-time values, a value carried round
    a loop, ...), from the TTIR Triton's frontend makes for each launch
    (narrow_addresses.py; on a GPU always, from the compiled IR).
    ``reach``: the shape the judge's reach check calls (None: one drawn from the task's
    reach, kernels/reach.py); ``reach_rows_from``: the condition of the values its first
    row takes, the rest in turn (0: plain; None: drawn).

    Raises ValueError / KeyError only for bad arguments (unknown task, dtype, shape set).
    """
    task = get_task(task_name)
    if dtype not in DTYPES or dtype not in task.tolerances:
        raise ValueError(f"task {task_name}: dtype {dtype!r} not in {sorted(task.tolerances)}")
    on_gpu = torch.cuda.is_available()
    do_time = on_gpu if timing is None else bool(timing and on_gpu)
    shape_set, shape_list = resolve_shapes(task, shapes, on_gpu)
    if timeout_s is None:
        timeout_s = work_timeout_s(len(shape_list), seeds, on_gpu=on_gpu)
    env = detect_environment(peaks)
    request = {
        "mode": "evaluate", "task": task_name, "source": source, "dtype": dtype,
        "shapes": [list(s) for s in shape_list], "seeds": seeds, "timing": do_time,
        "seed_base": secrets.randbelow(2**30), "conditions": bool(conditions),
        "refuse_introspection": bool(refuse_introspection),
        "refuse_surroundings": bool(refuse_surroundings),
        "refuse_imports": bool(refuse_imports),
        "parent_timings": dict(parent.timings_median()) if parent else {},
        "parent_source": parent_source,
        "settle_s": settle_s,
        "property_examples": property_examples, "regressions": regressions.load(task_name),
        "wide_offsets": [list(wide_offsets[0]), int(wide_offsets[1])] if wide_offsets else None,
        "far_rows": int(far_rows) if far_rows else None,
        "narrow_addresses": bool(narrow_addresses),
        "reach": [int(d) for d in reach] if reach else None,
        "reach_rows_from": None if reach_rows_from is None else int(reach_rows_from),
        "gpu_timestamps": kernel_clock.preference(), "compile_ahead": ahead.wanted(),
        "peaks": {"mem_bandwidth_gbps": env.get("mem_bandwidth_gbps"),
                  "peak_tflops": env.get("peak_tflops")},
    }
    # the generated candidate's and incumbent's kernels, compiled outside the jail into
    # the layer every evaluation reads (trusted_cache.py): a second evaluation of the
    # same code compiles none of it
    filled = trusted_cache.fill(task_name, request, task.timed(shape_list)) \
        if on_gpu and trusted_layer() is not None else None
    request["compiled_trusted"] = (filled or {}).pop("covered", [])
    bounds = interpreter_pass.start(task, request) if on_gpu else None
    shared = neighbours.shared_note() if on_gpu else None
    try:
        outcome = run_worker(request, timeout_s=timeout_s, use_gpu=on_gpu,
                             mem_limit_mb=mem_limit_mb)
        waited = time.perf_counter()
        bounds_outcome = bounds[1].result() if bounds else None
        waited = time.perf_counter() - waited  # the interpreter's share of the wall time
    finally:
        if bounds:
            bounds[0].shutdown(wait=False, cancel_futures=True)
    data = outcome.data
    regressions.keep(task_name, data.get("judge") if isinstance(data.get("judge"), dict) else None)
    if on_gpu:
        shared = shared or neighbours.shared_note()  # one that came while it ran
    result = EvalResult(
        ok=False, stage=data.get("stage") or "run", task_name=task_name, dtype=dtype,
        shape_set=shape_set, error_kind=data.get("error_kind"),
        error_message=inert(data.get("error_message")),
        failing_shapes=list(dict.fromkeys(data.get("failing_shapes", []))),
        shapes_checked=list(data.get("checked", [])),
        per_shape_errors=data.get("per_shape", {}), env=env,
        config=header_constants(source),
        source_hash=source_hash(source),
        wall_s=outcome.wall_s, containment=outcome.containment, gpu_shared=shared,
        judge=judge if isinstance(judge := data.get("judge"), dict) else {},
        artifacts={"stdout_tail": inert(outcome.stdout_tail) or "",
                   "stderr_tail": inert(outcome.stderr_tail) or "",
                   "traceback": inert(data.get("traceback", "")) or "",
                   "wall_s": json.dumps(data.get("wall_s", {})),
                   "lock_wait": json.dumps(data.get("gpu_lock_wait_s")),
                   "compiled_ahead": json.dumps(data.get("compiled_ahead")),
                   "trusted_compile": json.dumps(filled),
                   "trusted_layer_reads": json.dumps(data.get("trusted_layer_reads")),
                   "interpreter_wait_s": f"{waited:.3f}" if bounds else ""},
    )
    _fill_error_stats(result)
    result.ok = result.error_kind is None and result.stage in ("correctness", "performance")
    if not data.get("final") and result.error_kind is None:
        result.error_kind, result.stage = "missing_run", "run"
        result.error_message = "the worker ended without a result"
    if bounds_outcome is not None:
        _apply_bounds(result, bounds_outcome)
    if result.ok:
        fill_timing(result, task, data, shape_list, parent, baseline, on_gpu, do_time,
                    parent_source=parent_source)
    result.text = feedback.render(result)
    return result


def _apply_bounds(result: EvalResult, found: interpreter_pass.Outcome) -> None:
    """The interpreter's out-of-bounds finding fails a candidate the GPU passed."""
    result.artifacts["interpreter_pass"] = found.note
    if found.failure and result.ok:
        result.ok, result.stage = False, "correctness"
        result.error_kind, result.error_message = interpreter_pass.KIND, found.failure
        result.failing_shapes = found.failing_shapes


def _fill_error_stats(result: EvalResult) -> None:
    stats = list(result.per_shape_errors.values())
    if not stats:
        return
    result.max_abs_err = max(s["max_abs_err"] for s in stats)
    result.max_rel_err = max(s["max_rel_err"] for s in stats)
    result.mean_abs_err = sum(s["mean_abs_err"] for s in stats) / len(stats)
    result.bias = max((s["bias"] for s in stats), key=abs)
    result.mismatch_share = max(s["mismatch_share"] for s in stats)
    if not all(math.isfinite(v) for v in (result.max_abs_err, result.max_rel_err)):
        result.max_abs_err = result.max_rel_err = None


def fill_timing(result: EvalResult, task: Task, data: dict[str, Any], shapes: list[Shape],
                parent: EvalResult | None, baseline: Baseline | None, on_gpu: bool = True,
                do_time: bool = True, parent_source: str | None = None) -> None:
    """The timing layer from a worker's per-shape timings and resources (also used by the
    replay of measured spaces, so both judge a candidate the same way). GPU time is the
    figure (compare.py); call time is kept beside it."""
    timings = data.get("timings") or {}
    if not timings:
        result.timing_note = ("CPU interpreter: correctness only, no GPU timing" if not on_gpu
                              else "timing disabled")
        return
    result.timing_available = True
    result.stage = "performance"
    result.timings = {k: (float(v[0]), float(v[1])) for k, v in timings.items()}
    result.graph_timings = {k: float(v) for k, v in (data.get("graph_timings") or {}).items()
                            if v is not None}
    labels = list(result.timings)
    _fill_gpu(result, data.get("gpu") or {}, labels, parent, parent_source)
    result.settle = data.get("settle")
    figures = result.gpu_median() or result.timings_median()
    weights = [result.objective_weights.get(k, 1.0) for k in labels]
    result.time_ms = geomean([figures[k] for k in labels], weights)
    if baseline and all(k in baseline.timings for k in labels):
        result.baseline_timings = {k: baseline.timings[k] for k in labels}
        result.baseline_ms = geomean(list(result.baseline_timings.values()), weights)
        result.speedup_vs_baseline = result.baseline_ms / result.time_ms
    retimed = {k: float(v) for k, v in (data.get("parent_retimed") or {}).items()
               if parent and k in parent.timings_median()}
    if retimed and parent is not None:  # the parent retimed beside the candidate (10x rule)
        result.parent_retimed = {k: parent.timings_median()[k] for k in retimed}
    if result.comparison is None and parent is not None:
        before = parent.gpu_median() if result.gpu_timings else \
            {**parent.timings_median(), **retimed}
        if all(k in before for k in labels):  # no comparison: figures shown, no verdict
            result.parent_timings = {k: before[k] for k in labels}
            result.parent_ms = geomean(list(result.parent_timings.values()), weights)
            result.speedup_vs_parent = result.parent_ms / result.time_ms
    dtype = DTYPES[result.dtype]
    by_label = {task.shape_label(s): s for s in shapes}
    seconds = sum(figures[k] for k in labels) * 1e-3
    total_bytes = sum(task.bytes_moved(by_label[k], dtype) for k in labels)
    total_flops = sum(task.flops(by_label[k], dtype) for k in labels)
    result.achieved_gbps = total_bytes / seconds / 1e9
    result.achieved_tflops = total_flops / seconds / 1e12
    peak = result.env.get("peak_tflops") if task.compute_bound \
        else result.env.get("mem_bandwidth_gbps")
    achieved = result.achieved_tflops if task.compute_bound else result.achieved_gbps
    if peak:
        result.peak_share = achieved / peak
    resources = data.get("resources") or {}
    result.registers, result.spills = resources.get("registers"), resources.get("spills")
    result.smem_bytes = resources.get("smem_bytes")
    result.suspect_reasons = list(data.get("suspect_reasons") or [])
    result.suspect = bool(result.suspect_reasons)
    warps = result.config.get("NUM_WARPS")
    result.bottleneck_hint = feedback.bottleneck_hint(
        result, compute_bound=task.compute_bound,
        num_warps=warps if isinstance(warps, int) else None,
        smem_per_sm_kib=result.env.get("smem_per_sm_kib"))


def _fill_gpu(result: EvalResult, gpu: dict[str, Any], labels: list[str],
              parent: EvalResult | None, parent_source: str | None) -> None:
    """GPU times, host costs and the comparison with the incumbent, from the worker."""
    alone = gpu.get("alone") or {}
    result.objective_weights = {k: float(v) for k, v in (gpu.get("weights") or {}).items()}
    result.gpu_timings = {k: (float(v[0]), float(v[1])) for k, v in alone.items()
                          if k in labels}
    result.host_timings = {k: float(v[2]) for k, v in alone.items() if k in labels}
    result.busy_timings = {k: float(v) for k, v in (gpu.get("busy_ms") or {}).items()
                           if k in labels and v is not None}
    if not gpu.get("comparison"):
        return
    comparison = Comparison.from_dict(gpu["comparison"])
    if parent_source is not None:
        comparison.incumbent_hash = source_hash(parent_source)
    result.comparison = comparison
    shapes = comparison.shapes
    weights = [result.objective_weights.get(k, 1.0) for k in labels]
    result.parent_timings = {k: shapes[k].incumbent_ms for k in labels if k in shapes}
    if len(result.parent_timings) == len(labels):
        result.parent_ms = geomean([result.parent_timings[k] for k in labels], weights)
    result.speedup_vs_parent = comparison.ratio
    result.regressions = {k: 1.0 / s.ratio - 1.0 for k, s in shapes.items()
                          if comparison.shape_outcome(k) is Verdict.regressed}
    before = parent.gpu_median() if parent is not None else {}
    drift = [result.parent_timings[k] / before[k] for k in result.parent_timings
             if before.get(k)]
    if drift:
        result.incumbent_drift = geomean(drift)


def measure_baseline(task_name: str, dtype: str = "float16",
                     shapes: str | list[tuple[int, ...]] = "auto",
                     timeout_s: float = 300.0) -> Baseline | None:
    """Per-shape PyTorch-eager timings on this GPU, in a subprocess; None without CUDA."""
    if not torch.cuda.is_available():
        return None
    task = get_task(task_name)
    _, shape_list = resolve_shapes(task, shapes, on_gpu=True)
    request = {"mode": "baseline", "task": task_name, "dtype": dtype,
               "shapes": [list(s) for s in shape_list]}
    outcome = run_worker(request, timeout_s=timeout_s, use_gpu=True, mem_limit_mb=None)
    if not outcome.data.get("final"):
        raise RuntimeError(f"baseline measurement failed: {outcome.stderr_tail[-800:]}")
    return Baseline(task_name=task_name, dtype=dtype, timings=outcome.data["timings"],
                    gpu_name=detect_environment().get("gpu_name"))
