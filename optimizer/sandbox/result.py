"""The typed result of one evaluation, and the reference timings it is compared with.

One object carries every layer of feedback (stage, error statistics, timing, compiled
metadata, guards) so that the optimizer, the report and the experience record read the
same numbers. ``None`` means "not measured", never -1. This module imports nothing but
the standard library and the floor's verdict rule: ``feedback_dict`` produces plain data
that validates as ``kb.record.Feedback`` without the sandbox importing pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelkb.kernels.shared.comparison import Comparison

# Failure kinds, in the order a failure is reported when a shape shows several.
ERROR_KINDS: tuple[str, ...] = (
    "syntax_error",
    "import_error",
    "signature_mismatch",  # run() cannot take the task's arguments as the task names them
    "config_mismatch",  # the configuration header is not what the candidate launches
    "compile_error",
    "runtime_error",
    "illegal_memory_access",
    "crash",
    "timeout",
    "out_of_memory",
    "cheat_tamper",
    "cheat_timer",
    "torch_compute",
    "cheat_unsynchronised",
    "cheat_input_modified",
    "cheat_aliasing",
    "cheat_cached_output",
    "cheat_replay",
    "wrong_result",
    "bias",
    "missing_run",
    "worker_died",  # the process or host measuring it died (a cluster's worker, twice)
)


@dataclass(frozen=True)
class Baseline:
    """Per-shape reference (PyTorch eager) timings on one GPU, measured once per run."""

    task_name: str
    dtype: str
    timings: dict[str, float]  # shape label -> median ms
    gpu_name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"task_name": self.task_name, "dtype": self.dtype,
                "timings": dict(self.timings), "gpu_name": self.gpu_name}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Baseline:
        return cls(task_name=data["task_name"], dtype=data["dtype"],
                   timings={str(k): float(v) for k, v in data["timings"].items()},
                   gpu_name=data.get("gpu_name"))


@dataclass
class EvalResult:
    """Layered feedback on one candidate. ``ok`` means it passed correctness."""

    ok: bool
    stage: str  # syntax | compile | run | correctness | performance
    task_name: str
    dtype: str
    shape_set: str
    error_kind: str | None = None
    error_message: str | None = None
    failing_shapes: list[str] = field(default_factory=list)
    shapes_checked: list[str] = field(default_factory=list)
    # error statistics, worst over shapes and seeds
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mean_abs_err: float | None = None
    bias: float | None = None  # signed mean error / mean |reference|, largest magnitude
    mismatch_share: float | None = None
    per_shape_errors: dict[str, dict[str, Any]] = field(default_factory=dict)
    # timing (GPU only)
    timing_available: bool = False
    timing_note: str | None = None
    timings: dict[str, tuple[float, float]] = field(default_factory=dict)  # call: median, iqr
    graph_timings: dict[str, float] = field(default_factory=dict)  # CUDA-graph replay ms
    gpu_timings: dict[str, tuple[float, float]] = field(default_factory=dict)  # GPU: median, iqr
    host_timings: dict[str, float] = field(default_factory=dict)  # host ms of one call
    # GPU busy ms per call by the GPU's own timestamps, all streams (kernel_clock.py)
    busy_timings: dict[str, float] = field(default_factory=dict)
    objective_weights: dict[str, float] = field(default_factory=dict)
    # the interleaved comparison with the incumbent, if any
    comparison: Comparison | None = None
    incumbent_drift: float | None = None  # incumbent's GPU time now / when it was measured
    settle: dict[str, Any] | None = None  # how the GPU was brought to a steady state
    # what the judge checked itself (judge.py): shapes re-run on fresh inputs, its clock
    judge: dict[str, Any] = field(default_factory=dict)
    time_ms: float | None = None  # weighted geomean of GPU times (call times without them)
    baseline_ms: float | None = None
    parent_ms: float | None = None
    baseline_timings: dict[str, float] = field(default_factory=dict)
    parent_timings: dict[str, float] = field(default_factory=dict)
    parent_retimed: dict[str, float] = field(default_factory=dict)  # earlier figure, per shape
    speedup_vs_baseline: float | None = None
    speedup_vs_parent: float | None = None
    achieved_gbps: float | None = None
    achieved_tflops: float | None = None
    peak_share: float | None = None
    registers: int | None = None
    spills: int | None = None
    smem_bytes: int | None = None
    bottleneck_hint: str | None = None
    suspect: bool = False
    suspect_reasons: list[str] = field(default_factory=list)
    regressions: dict[str, float] = field(default_factory=dict)  # shape -> slowdown share
    text: str = ""
    artifacts: dict[str, str] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    source_hash: str = ""
    wall_s: float | None = None
    containment: str | None = None  # "namespaces", or "uncontained: <why>" (runner.py)
    gpu_shared: str | None = None  # other processes on the GPU, when NVML saw any

    def timings_median(self) -> dict[str, float]:
        """shape label -> median call ms, the form a child's evaluation compares against."""
        return {label: med for label, (med, _) in self.timings.items()}

    def gpu_median(self) -> dict[str, float]:
        """shape label -> median GPU ms (the figures verdicts use)."""
        return {label: med for label, (med, _) in self.gpu_timings.items()}

    @property
    def outcome(self) -> str | None:
        """The comparison's outcome: improved / neutral / regressed; None without one."""
        return self.comparison.outcome.value if self.comparison else None

    def _comparison_dict(self) -> dict[str, Any] | None:
        c = self.comparison
        if not c:
            return None
        return {"ratio": c.ratio, "low": c.low, "high": c.high, "rounds": c.rounds,
                "calls_per_round": c.calls_per_round, "noise_floor": c.noise_floor,
                "outcome": c.outcome.value, "incumbent_hash": c.incumbent_hash,
                "drift": self.incumbent_drift}

    def _shape_row(self, label: str, med: float, iqr: float) -> dict[str, Any]:
        gpu = self.gpu_timings.get(label)
        shape = self.comparison.shapes.get(label) if self.comparison else None
        return {"shape": label, "median_ms": med, "iqr_ms": iqr,
                "graph_ms": self.graph_timings.get(label),
                "baseline_ms": self.baseline_timings.get(label),
                "gpu_ms": gpu[0] if gpu else None, "gpu_iqr_ms": gpu[1] if gpu else None,
                "host_ms": self.host_timings.get(label),
                "ratio": shape.ratio if shape else None,
                "ratio_low": shape.low if shape else None,
                "ratio_high": shape.high if shape else None}

    def feedback_dict(self) -> dict[str, Any]:
        """The feedback layer of an experience record (validates as kb.record.Feedback)."""
        timings = [self._shape_row(label, med, iqr) for label, (med, iqr) in self.timings.items()]
        return {
            "stage": self.stage,
            "error_kind": self.error_kind,
            "error_message": self.error_message,
            "failing_shapes": list(self.failing_shapes),
            "max_abs_err": self.max_abs_err,
            "max_rel_err": self.max_rel_err,
            "mean_abs_err": self.mean_abs_err,
            "bias": self.bias,
            "mismatch_share": self.mismatch_share,
            "timing_available": self.timing_available,
            "timings": timings,
            "time_ms": self.time_ms,
            "baseline_ms": self.baseline_ms,
            "parent_ms": self.parent_ms,
            "speedup_vs_baseline": self.speedup_vs_baseline,
            "speedup_vs_parent": self.speedup_vs_parent,
            "achieved_gbps": self.achieved_gbps,
            "achieved_tflops": self.achieved_tflops,
            "peak_share": self.peak_share,
            "registers": self.registers,
            "spills": self.spills,
            "smem_bytes": self.smem_bytes,
            "bottleneck_hint": self.bottleneck_hint,
            "suspect": self.suspect,
            "comparison": self._comparison_dict(),
            "time_basis": ("gpu" if self.gpu_timings else "call") if self.timing_available
            else None,
            "text": self.text,
        }
