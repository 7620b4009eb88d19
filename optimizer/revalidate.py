"""Re-time the store's best known configurations of a task here and now, and record the drift.

A Triton upgrade (or another card) can turn yesterday's best configuration into a slow
one, or one that no longer compiles, while the store keeps serving it. ``revalidate``
takes the task's best N distinct configurations by measured speedup (any GPU, any
version), evaluates each with the real sandbox on this GPU and Triton version, and
writes each as an experience whose feedback says how far it moved from the stored figure
(same GPU: time per shape; another GPU: only the speedup against PyTorch eager compares).
On the CPU interpreter nothing is timed: correctness only, and the report says so.
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol

from kernelkb.kb.record import Edit, Environment, ExperienceRecord, Feedback, Provenance, TaskInfo
from kernelkb.kernels.base import Shape, Task
from kernelkb.kernels.config import Config
from kernelkb.kernels.shared.hashing import source_hash
from kernelkb.kernels.shared.stats import geomean
from kernelkb.kernels.shared.vocabulary import RoundKind, Verdict
from kernelkb.optimizer.diffcheck import unified_diff
from kernelkb.optimizer.eval_pool import Job
from kernelkb.optimizer.sandbox.timing import LAUNCH_BOUND_MS
from kernelkb.optimizer.spaces import parse_label
from kernelkb.optimizer.verdict import judge, noise_threshold

if TYPE_CHECKING:
    from kernelkb.kb.queries import Page
    from kernelkb.optimizer.eval_pool import EvalPool

log = logging.getLogger(__name__)
PAGE = 500


class StoredRecords(Protocol):
    """What a revalidation needs of a store: its measured records, page by page
    (``Knowledge.list``: the CLI passes the store ``open_for_runs`` opened)."""

    def list(self, **filters: Any) -> Page: ...


@dataclass
class Known:
    """One distinct configuration and the stored measurements of it."""

    config: dict[str, Any]
    best: ExperienceRecord  # its highest measured speedup vs eager, on any GPU / version
    same_gpu: ExperienceRecord | None = None  # its best on the GPU being revalidated

    @property
    def reference(self) -> ExperienceRecord:
        """The stored figure the new one is compared with: this GPU's where there is one."""
        return self.same_gpu or self.best


@dataclass
class Revalidated:
    known: Known
    record: ExperienceRecord
    time_drift: float | None  # new / stored time over the shapes both timed; None: untimed
    speedup_now: float | None  # vs PyTorch eager, here and now
    note: str


@dataclass
class RevalidationResult:
    task: str
    env: Environment
    timed: bool
    shapes: list[str]
    rows: list[Revalidated] = field(default_factory=list)
    records: list[ExperienceRecord] = field(default_factory=list)


def _speedup(record: ExperienceRecord) -> float:
    return record.feedback.speedup_vs_baseline or 0.0


def best_known(records: list[ExperienceRecord], task: Task, gpu_name: str,
               top: int) -> list[Known]:
    """The ``top`` distinct configurations of the task with the best measured speedup vs
    eager; only whole configurations of the task's space that still render."""
    by_config: dict[str, Known] = {}
    for record in records:
        config = task.complete(record.edit.config)  # variants added since: as they were
        if (record.evidence != "measured" or record.feedback.speedup_vs_baseline is None
                or config is None or not _renders(task, config)):
            continue
        key = json.dumps(config, sort_keys=True)
        known = by_config.setdefault(key, Known(config, record))
        if _speedup(record) > _speedup(known.best):
            known.best = record
        if record.env.gpu_name == gpu_name and (
                known.same_gpu is None or _speedup(record) > _speedup(known.same_gpu)):
            known.same_gpu = record
    return sorted(by_config.values(), key=lambda k: -_speedup(k.best))[:top]


def _renders(task: Task, config: Config) -> bool:
    try:
        task.render(config)
    except (KeyError, ValueError):
        return False
    return True


def stored_records(knowledge: StoredRecords, task: Task, dtype: str) -> list[ExperienceRecord]:
    """Every measured experience of the task in the store (paged through ``list``)."""
    out: list[ExperienceRecord] = []
    offset = 0
    while True:
        page = knowledge.list(task_id=task.name, dtype=dtype, evidence="measured",
                              offset=offset, limit=PAGE)
        out.extend(page.items)
        offset += len(page.items)
        if not page.items or offset >= page.total:
            return out


def revalidate(task: Task, knowledge: StoredRecords, *, top: int = 5, dtype: str = "float16",
               shapes: str | list[Shape] = "auto", seeds: int = 3, timeout_s: float = 60.0,
               command: str | None = None, pool: EvalPool | None = None
               ) -> RevalidationResult:
    """Evaluate the best known configurations here, or on ``pool`` (several GPUs of this
    host or a Ray cluster: optimizer/eval_pool.py); ``shapes``: "auto" (the stored
    record's own shapes on a GPU, so times compare shape by shape; the task's CPU shapes
    on the interpreter), "stored", a named set of the task, or a list of shapes. Each
    configuration is timed against the naive kernel interleaved in its own evaluation,
    so they may run at once on as many GPUs."""
    from kernelkb.optimizer import sandbox

    here = pool.call if pool is not None else (lambda function, *args: function(*args))
    evaluate = pool.evaluate if pool is not None else sandbox.evaluate
    env = Environment(**here(sandbox.detect_environment))
    on_gpu = env.arch != "cpu"
    known = best_known(stored_records(knowledge, task, dtype), task, env.gpu_name, top)
    if not known:
        raise LookupError(f"no measured configuration of task {task.name} ({dtype}) in the "
                          "store to revalidate")
    if shapes == "auto":
        shapes = "stored" if on_gpu else "cpu"
    per_config = {id(k): _shapes_for(task, k, shapes) for k in known}
    union = list(dict.fromkeys(s for v in per_config.values() for s in v))
    baseline = here(sandbox.measure_baseline, task.name, dtype, union) if on_gpu else None
    naive = task.render({})
    start = evaluate(task.name, naive, dtype=dtype, shapes=union, baseline=baseline,
                     seeds=seeds, timeout_s=timeout_s)
    run_id = _run_id(task.name)
    result = RevalidationResult(task.name, env, timed=bool(start.timing_available),
                                shapes=[task.shape_label(s) for s in union])
    result.records.append(_record(
        run_id, 0, task, dtype, env, union, naive, naive, {}, ["baseline"],
        f"starting kernel of {task.name}, evaluated beside the revalidated configurations",
        start, Verdict.neutral if start.ok else Verdict.failed, "baseline", command, None))
    jobs: list[Job] = [
        (task.name, task.render(k.config),
         {"dtype": dtype, "shapes": per_config[id(k)], "parent": start if start.ok else None,
          "parent_source": naive if start.ok else None, "baseline": baseline,
          "seeds": seeds, "timeout_s": timeout_s}) for k in known]
    found = pool.evaluate_many(jobs) if pool is not None else \
        [evaluate(name, source, **kwargs) for name, source, kwargs in jobs]
    for n, (k, evaluated) in enumerate(zip(known, found, strict=True), 1):
        source = task.render(k.config)
        verdict = judge(evaluated, start if start.ok else None, claimed_gain=False,
                        noise=noise_threshold(evaluated, start))
        drift, note = _drift(k, evaluated, env)
        ref = k.reference
        summary = (f"revalidate a best known configuration ({_speedup(k.best):.2f}x vs eager "
                   f"on {k.best.env.gpu_name}, Triton {k.best.env.triton_version}) on "
                   f"{env.gpu_name}, Triton {env.triton_version}")
        record = _record(run_id, n, task, dtype, env, per_config[id(k)], naive, source,
                         k.config, _categories(task, k.config), summary, evaluated, verdict,
                         "revalidate", command, f"{note} [stored: {ref.id}]")
        result.records.append(record)
        result.rows.append(Revalidated(k, record, drift, evaluated.speedup_vs_baseline, note))
    return result


def _shapes_for(task: Task, known: Known, shapes: str | list[Shape]) -> list[Shape]:
    if isinstance(shapes, list):
        return [tuple(s) for s in shapes]
    if shapes == "stored":
        labels = [t.shape for t in known.reference.feedback.timings]
        return [parse_label(task, label) for label in labels] or list(task.shapes("tune"))
    return list(task.shapes(shapes))


def _drift(known: Known, evaluated: Any, env: Environment) -> tuple[float | None, str]:
    """(new / stored time over the common shapes, the sentence that says it)."""
    ref = known.reference
    where = "same GPU" if ref.env.gpu_name == env.gpu_name else f"other GPU ({ref.env.gpu_name})"
    version = ("same Triton" if ref.env.triton_version == env.triton_version else
               f"Triton {ref.env.triton_version} -> {env.triton_version}")
    stored = f"stored on {where}, {version}"
    if not evaluated.ok:
        return None, (f"revalidation FAILED here ({evaluated.error_kind}: "
                      f"{(evaluated.error_message or '')[:120]}); {stored}")
    if not evaluated.timing_available:
        return None, f"correct here; not timed (CPU interpreter); {stored}"
    then = {t.shape: t.median_ms for t in ref.feedback.timings}
    common = [s for s in evaluated.timings if s in then]
    drift = None
    text = f"{stored}: no shape timed in both"
    if common:
        ratio = {s: evaluated.timings[s][0] / then[s] for s in common}
        # a launch-bound figure measures the host path and moves up to 5x between
        # processes: the drift summary counts the shapes that time the kernel, if any
        counted = [s for s in common if then[s] >= LAUNCH_BOUND_MS] or common
        drift = geomean(ratio[s] for s in counted)
        left_out = len(common) - len(counted)
        text = (f"{stored}: time {100 * (drift - 1):+.1f}% over {len(counted)} shapes"
                + (f" ({left_out} launch-bound shape(s) under {1000 * LAUNCH_BOUND_MS:.0f} us "
                   "left out)" if left_out else "")
                + ("" if ref.env.gpu_name == env.gpu_name else " (another card: expected)")
                + "; per shape: " + ", ".join(f"{s} {100 * (ratio[s] - 1):+.1f}%"
                                              for s in common))
    if evaluated.speedup_vs_baseline and ref.feedback.speedup_vs_baseline:
        text += (f"; vs eager {ref.feedback.speedup_vs_baseline:.2f}x then, "
                 f"{evaluated.speedup_vs_baseline:.2f}x now")
    return drift, text


def _categories(task: Task, config: dict[str, Any]) -> list[str]:
    default = task.default_config
    changed = {p.category for p in task.params if config.get(p.name) != default[p.name]}
    return sorted(changed) or ["other"]


def _record(run_id: str, iteration: int, task: Task, dtype: str, env: Environment,
            shapes: list[Shape], parent: str, source: str, config: dict[str, Any],
            categories: list[str], summary: str, evaluated: Any, verdict: Verdict,
            round_kind: RoundKind, command: str | None, drift: str | None) -> ExperienceRecord:
    feedback = evaluated.feedback_dict()
    if drift:
        feedback["text"] = f"{feedback['text']}\nrevalidation: {drift}".strip()
    return ExperienceRecord(
        run_id=run_id, iteration=iteration,
        task=TaskInfo(op_type=task.op_type, task_id=task.name, dtype=dtype,
                      shape_set="revalidate:" + ";".join(task.shape_label(s) for s in shapes)),
        env=env,
        edit=Edit(summary=summary, categories=categories,
                  diff=unified_diff(parent, source) if source != parent else "",
                  config=config, parent_hash=source_hash(parent) if iteration else None,
                  child_hash=source_hash(source)),
        feedback=Feedback(**feedback), verdict=verdict,
        provenance=Provenance(agent="revalidate", round_kind=round_kind, command=command,
                              source=f"revalidate on {env.gpu_name}, Triton {env.triton_version}"),
    )


def _run_id(task_name: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"revalidate-{task_name}-{stamp}-{secrets.token_hex(3)}"


def table(result: RevalidationResult) -> str:
    """The drift table, one row per configuration."""
    head = (f"revalidate {result.task} on {result.env.gpu_name}, Triton "
            f"{result.env.triton_version}, shapes: {'; '.join(result.shapes)}")
    lines = [head]
    if not result.timed:
        lines.append("CPU interpreter: correctness checked only; NOTHING WAS TIMED, so no "
                     "drift is measured.")
    lines.append(f"{'#':>2} {'stored on':24} {'GPU':5} {'triton':8} {'then':>7} {'now':>7} "
                 f"{'time drift':>10}  verdict    config")
    for n, row in enumerate(result.rows, 1):
        ref = row.known.reference
        then = f"{ref.feedback.speedup_vs_baseline:.2f}x"
        now = f"{row.speedup_now:.2f}x" if row.speedup_now else "-"
        drift = f"{100 * (row.time_drift - 1):+.1f}%" if row.time_drift else "-"
        if row.record.verdict in (Verdict.failed, Verdict.incorrect):
            drift = row.record.verdict.value.upper()
        config = ", ".join(f"{k}={v}" for k, v in row.known.config.items())
        gpu = "same" if ref.env.gpu_name == result.env.gpu_name else "other"
        lines.append(f"{n:>2} {ref.env.gpu_name[:24]:24} {gpu:5} {ref.env.triton_version[:8]:8} "
                     f"{then:>7} {now:>7} {drift:>10}  {row.record.verdict.value:10} {config}")
    lines.append("then / now: speedup vs PyTorch eager on its GPU; time drift: new / stored "
                 "time, geomean over the shapes both timed that are not launch-bound (a real "
                 "drift only where GPU is 'same')")
    return "\n".join(lines)
