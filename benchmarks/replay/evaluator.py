"""An evaluator that answers from a measured space instead of a GPU.

It has ``optimizer.sandbox.evaluate``'s signature and returns a real ``EvalResult`` built
from the recorded measurement (per-shape medians and IQRs, resources, the recorded
failure), so the loop's verdicts, noise thresholds and feedback text run unchanged.
Every call is logged, and a candidate the space cannot score is *unmeasured*:

- its config is in the file, correct, but untimed (a partial space): returned as a
  correct, untimed result (score unknown, like a CPU-only evaluation);
- its config is absent, or its source is not the task's rendering of that config (an
  LLM edit the space never saw): returned as a failure of kind ``unmeasured``.

Either way the evaluation counts against the budget and is reported, so a partial space
never silently flatters a method.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchmarks.replay.space import Space, config_key, geomean
from kb.record import source_hash
from kernels.base import DTYPES, header_constants
from optimizer.sandbox import feedback
from optimizer.sandbox.result import Baseline, EvalResult

UNMEASURED = "unmeasured"


@dataclass(frozen=True)
class Call:
    """One evaluation as the replay answered it."""

    key: str
    status: str  # timed | failed | untimed | absent
    time_ms: float | None


@dataclass
class ReplayEvaluator:
    space: Space
    calls: list[Call] = field(default_factory=list)

    def baseline(self) -> Baseline:
        """The PyTorch-eager timings recorded with the space, as the loop's baseline."""
        return Baseline(task_name=self.space.task.name, dtype=self.space.dtype,
                        timings={k: v[0] for k, v in self.space.baseline_ms.items()},
                        gpu_name=self.space.env.get("gpu_name"))

    def __call__(self, task_name: str, source: str, *, dtype: str = "float16",
                 shapes: Any = "auto", parent: EvalResult | None = None,
                 baseline: Baseline | None = None, seeds: int = 3, timeout_s: float = 60.0,
                 **_: Any) -> EvalResult:
        space, task = self.space, self.space.task
        if task_name != task.name or dtype != space.dtype:
            raise ValueError(f"this replay holds {task.name}/{space.dtype}, "
                             f"not {task_name}/{dtype}")
        header = header_constants(source)
        names = [p.name for p in (*task.knobs, *task.variants)]
        config = {n: header[n] for n in names if n in header}
        key = config_key(config)
        result = EvalResult(ok=False, stage="run", task_name=task.name, dtype=dtype,
                            shape_set="space:" + ";".join(space.shapes), env=dict(space.env),
                            config=header, source_hash=source_hash(source), wall_s=None)
        row = space.rows.get(key) if len(config) == len(names) else None
        if row is None or _rendering(task, config) != source:
            why = "its configuration is not in the space file" if row is None else \
                "its source is not the task's rendering of a measured configuration"
            result.error_kind = UNMEASURED
            result.error_message = f"replay cannot score this candidate: {why}"
            self.calls.append(Call(key, "absent", None))
        elif not row.get("ok"):
            result.stage = row.get("stage") or "run"
            result.error_kind = row.get("error_kind") or "runtime_error"
            result.error_message = row.get("error_message")
            result.failing_shapes = list(row.get("failing_shapes") or [])
            self.calls.append(Call(key, "failed", None))
        else:
            result.ok, result.stage = True, "correctness"
            result.shapes_checked = list(space.shapes)
            if Space.is_timed(row):
                _fill_timing(result, space, row, parent, baseline)
                self.calls.append(Call(key, "timed", result.time_ms))
            else:
                result.timing_note = f"{UNMEASURED}: correct but not timed in the partial " \
                                     f"space {space.path.name}"
                self.calls.append(Call(key, "untimed", None))
        if row is not None and row.get("max_rel_err") is not None:
            # the space keeps only the edge-shape max rel error; the feedback renderer
            # needs the full statistics, so it travels as an artifact
            result.artifacts["space_max_rel_err"] = str(row["max_rel_err"])
        result.text = feedback.render(result)
        return result


def _rendering(task: Any, config: dict[str, Any]) -> str | None:
    try:
        return task.render(config)
    except (KeyError, ValueError):
        return None


def _fill_timing(result: EvalResult, space: Space, row: dict[str, Any],
                 parent: EvalResult | None, baseline: Baseline | None) -> None:
    """The timing layer as optimizer.sandbox.evaluator fills it, from recorded numbers."""
    task = space.task
    result.stage, result.timing_available = "performance", True
    result.timings = {label: (float(v[0]), float(v[1])) for label, v in row["times_ms"].items()}
    labels = list(result.timings)
    result.time_ms = geomean([result.timings[k][0] for k in labels])
    base = baseline.timings if baseline else {k: v[0] for k, v in space.baseline_ms.items()}
    if all(k in base for k in labels):
        result.baseline_timings = {k: base[k] for k in labels}
        result.baseline_ms = geomean(list(result.baseline_timings.values()))
        result.speedup_vs_baseline = result.baseline_ms / result.time_ms
    parent_times = parent.timings_median() if parent else {}
    if parent_times and all(k in parent_times for k in labels):
        result.parent_timings = {k: parent_times[k] for k in labels}
        result.parent_ms = geomean(list(result.parent_timings.values()))
        result.speedup_vs_parent = result.parent_ms / result.time_ms
        result.regressions = {
            k: result.timings[k][0] / parent_times[k] - 1 for k in labels
            if result.timings[k][0] > parent_times[k] * (1 + feedback.REGRESSION_SHARE)}
    by_label = {task.shape_label(s): s for s in (*task.sweep_shapes, *task.edge_shapes)}
    if all(k in by_label for k in labels):
        dtype = DTYPES[space.dtype]
        seconds = sum(result.timings[k][0] for k in labels) * 1e-3
        result.achieved_gbps = sum(task.bytes_moved(by_label[k], dtype) for k in labels) \
            / seconds / 1e9
        result.achieved_tflops = sum(task.flops(by_label[k], dtype) for k in labels) \
            / seconds / 1e12
        peak = space.env.get("peak_tflops" if task.compute_bound else "mem_bandwidth_gbps")
        achieved = result.achieved_tflops if task.compute_bound else result.achieved_gbps
        result.peak_share = achieved / peak if peak else None
    resources = row.get("resources") or {}
    result.registers, result.spills = resources.get("registers"), resources.get("spills")
    result.smem_bytes = resources.get("smem_bytes")
    warps = result.config.get("NUM_WARPS")
    result.bottleneck_hint = feedback.bottleneck_hint(
        result, compute_bound=task.compute_bound,
        num_warps=warps if isinstance(warps, int) else None,
        smem_per_sm_kib=space.env.get("smem_per_sm_kib"))
