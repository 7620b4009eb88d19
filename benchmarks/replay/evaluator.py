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

from benchmarks.replay.space import Space, config_key
from kernelkb.kernels.config import header_constants
from kernelkb.kernels.shared.hashing import source_hash
from kernelkb.optimizer.sandbox import feedback
from kernelkb.optimizer.sandbox.evaluator import fill_timing
from kernelkb.optimizer.sandbox.result import Baseline, EvalResult

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
                fill_timing(result, task, {"timings": row["times_ms"],
                                           "resources": row.get("resources") or {}},
                            [*task.sweep_shapes, *task.edge_shapes], parent,
                            baseline or self.baseline())
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
