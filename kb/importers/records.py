"""One measured configuration of someone else's tuning run -> an ``ExperienceRecord``.

Every format (Kernel Tuner caches, T4 results, Triton autotune caches, Inductor logs)
reduces a configuration to a ``Measurement``; this module maps it the same way for all,
and validates through ``kb.ingest.validate_batch``, so a bad value gets the same field
message as ``ingest``.

Kernel Tuner and T4 data are CUDA / HIP kernels tuned outside Triton: the records say so
with ``triton_version`` and ``torch_version`` "none". Triton and Inductor files were
compiled by Triton, but do not say which version: "unknown" unless the file's context
tells. What carries over is the configuration measured on a known GPU, not source: as
written in the file, or as a point of the project's task it maps onto (``task_id``,
kb/importers/tasks.py), timed on that task's shape label.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.shared.gpus import GpuFacts, UnknownPart


def json_number(value: Any) -> float | None:
    """A JSON number as a float (an integer too large for one: infinity, which the
    record's bounds then reject by name); None for anything else."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


@dataclass(frozen=True)
class ImportRejection:
    """A configuration (or a whole file) that was not imported, and why."""

    where: str  # "file:position", or "file" for the whole file
    errors: tuple[tuple[str, str], ...]  # (dotted field, reason)

    def lines(self) -> list[str]:
        return [f"{self.where}: {name}: {reason}" for name, reason in self.errors]


@dataclass(frozen=True)
class ImportNote:
    """Something the user should read that loses nothing: a skipped non-data file, a GPU
    taken from the file name. ``skip`` names why a whole file was skipped (one of
    ``SKIPS``), so a summary can count such files instead of listing each."""

    where: str
    message: str
    skip: str = ""


# why a whole file was skipped -> how a summary line counts them
SKIPS = {
    "triton-compiled": "Triton compile metadata (a compiled kernel's files in a Triton "
                       "cache, not tuning data)",
    "not-tuning-data": "not tuning data (JSON of no known format, or text with no "
                       "Inductor AUTOTUNE table)",
    "other-format": "of a format other than --format",
}


@dataclass(frozen=True)
class Measurement:
    """One configuration as a format module read it. ``time`` is ms, or the tool's failure
    label (a string) when the configuration did not run."""

    position: str  # the cache key or the results index
    iteration: int  # its order in the file
    config: dict[str, Any]
    time: float | str | None
    times: list[float] = field(default_factory=list)
    gbps: float | None = None
    gflops: float | None = None
    timestamp: str | None = None
    shape: str | None = None  # the shape it was timed on, when not the file's one
    dtype: str | None = None  # "float16"; None: the file does not say
    detail: str = ""  # for the feedback text: what the mapping left out or filled in
    gpu_time: bool = False  # timed on the GPU alone (Triton's do_bench: events, L2 flushed)


@dataclass(frozen=True)
class FileContext:
    """What every record of one file shares."""

    source: str  # "<data set>/<path>", also the "file" of "file:position"
    tool: str  # "Kernel Tuner" or "T4"
    agent: str  # "kernel_tuner" or "t4"
    fmt: str  # the --format value that reads the file
    kernel_name: str
    problem_size: str  # "4096x4096"
    facts: GpuFacts | UnknownPart  # UnknownPart: a device the facts table lacks
    device: str | None  # the device name as the file wrote it
    gpu_from: str  # how the GPU was found, for the feedback text
    license: str
    sha8: str
    task_id: str | None = None  # the project task the configurations are points of
    triton_version: str = "none"
    torch_version: str = "none"
    options: str = ""  # what the import command needed besides the file, e.g. "--gpu ..."

    @property
    def task(self) -> str:
        if self.task_id:
            return self.task_id
        return self.kernel_name.removesuffix("_kernel") or self.kernel_name

    @property
    def shape_set(self) -> str:
        return f"problem_size={self.problem_size}"


def classify_failure(label: str) -> tuple[str, str, str]:
    """(stage, error_kind, verdict) for a tool's failure label."""
    low = label.lower()
    if "compil" in low:
        return "compile", "compile_error", "failed"
    if "timeout" in low:
        return "run", "timeout", "failed"
    if "correctness" in low or "incorrect" in low:
        return "correctness", "wrong_result", "incorrect"
    if "runtime" in low or low == "run":
        return "run", "runtime_error", "failed"
    if "invalid" in low or "constraint" in low:  # refused before it was built
        return "compile", label, "failed"
    return "run", label, "failed"


def child_hash(kernel_name: str, config: dict[str, Any]) -> str:
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{kernel_name}|{canonical}".encode()).hexdigest()[:16]


def _scalar(value: Any) -> Any:
    """Config values the record holds as they are; lists and the like as JSON text."""
    if isinstance(value, bool | int | float | str):
        return value
    return json.dumps(value, sort_keys=True)


def _iqr(times: list[float]) -> float | None:
    if len(times) < 2:
        return None
    q = statistics.quantiles(times, n=4, method="inclusive")
    return q[2] - q[0]


def _feedback(ctx: FileContext, m: Measurement) -> tuple[dict[str, Any], str]:
    if isinstance(m.time, str):
        stage, kind, verdict = classify_failure(m.time)
        return {
            "stage": stage, "error_kind": kind, "error_message": m.time,
            "text": f"{ctx.tool} recorded {m.time} for this configuration ({ctx.source})"
                    + (f". {m.detail}" if m.detail else ""),
        }, verdict
    assert m.time is not None
    median = statistics.median(m.times) if m.times else m.time
    runs = f" over {len(m.times)} runs, median {median:.4g} ms" if m.times else ""
    timing = {"shape": m.shape or ctx.shape_set, "median_ms": median, "iqr_ms": _iqr(m.times)}
    gpu = {"time_basis": "gpu"} if m.gpu_time else {}
    if m.gpu_time:
        timing["gpu_ms"] = median
    # No parent: a point of a sweep is not an edit of another one, so "neutral" (the
    # ranker compares configurations within the file, not against a parent).
    return {
        "stage": "performance", "timing_available": True, "time_ms": m.time,
        "timings": [timing],
        "achieved_gbps": m.gbps,
        "achieved_tflops": m.gflops / 1000 if m.gflops is not None else None, **gpu,
        "text": f"{ctx.tool} measured {m.time:.4g} ms{runs} on {ctx.facts.name}"
                + (f" at {m.shape}" if m.shape else "")
                + f" ({ctx.source}; GPU from {ctx.gpu_from})"
                + (f". {m.detail}" if m.detail else ""),
    }, "neutral"


def _non_finite(m: Measurement) -> tuple[str, str] | None:
    if isinstance(m.time, float | int) and not math.isfinite(m.time):
        return "feedback.time_ms", f"not a finite number: {m.time}"
    if not isinstance(m.time, str) and any(not math.isfinite(t) for t in m.times):
        return "feedback.timings.0.median_ms", "the repeats (`times`) hold a non-finite value"
    return None


def record_dict(ctx: FileContext, m: Measurement) -> dict[str, Any]:
    """The record as ingest would receive it (JSON-ready dict)."""
    config = {str(k): _scalar(v) for k, v in m.config.items()}
    feedback, verdict = _feedback(ctx, m)
    data: dict[str, Any] = {
        "run_id": f"import:{ctx.task}:{ctx.facts.name}:{ctx.sha8}",
        "iteration": m.iteration,
        "task": {"op_type": ctx.task, "task_id": ctx.task, "dtype": m.dtype or "unspecified",
                 "shape_set": m.shape or ctx.shape_set},
        "env": {**ctx.facts.to_env_fields(), "triton_version": ctx.triton_version,
                "torch_version": ctx.torch_version},
        "edit": {
            "summary": f"{ctx.task} configuration from a {ctx.tool} sweep on {ctx.facts.name}",
            # a configuration point of these spaces is mostly block and tile sizes; the
            # closed category vocabulary has no better single word for "a whole config"
            "categories": ["tiling"],
            "diff": "",
            "config": config,
            "parent_hash": None,
            "child_hash": child_hash(ctx.kernel_name, config),
        },
        "feedback": feedback,
        "verdict": verdict,
        "provenance": {
            "agent": ctx.agent, "round_kind": "sweep", "source": ctx.source,
            "license": ctx.license, "device": ctx.device or None, "date": m.timestamp,
            "command": f"kernelkb import {ctx.source} --format {ctx.fmt}"
                       + (f" {ctx.options}" if ctx.options else ""),
        },
    }
    if m.timestamp:
        data["created_at"] = m.timestamp
    return data


def to_record(ctx: FileContext, m: Measurement) -> ExperienceRecord | ImportRejection:
    """Validate one measurement as ingest would; a problem names the file and position."""
    where = f"{ctx.source}:{m.position}"
    if m.time is None:
        return ImportRejection(where, (("feedback.time_ms", "no `time` for this configuration"),))
    problem = _non_finite(m)
    if problem is not None:
        return ImportRejection(where, (problem,))
    # here, not at the top: the CLI's parser reads the formats' names (registry.names)
    # without loading ingest's SQL and vector modules
    from kernelkb.kb.ingest import validate_batch

    good, bad = validate_batch([record_dict(ctx, m)])
    if bad:
        return ImportRejection(where, tuple((r.field, r.reason) for r in bad))
    return good[0]
