"""Resume an interrupted ``optimize`` run from what it wrote: its journal (and the store's
records of the run, where they went there).

Why: a run stopped by a crash, a reboot or a scheduler's limit kept every round it
finished, but starting again began from the task's naive kernel with the whole budget.
Kernel Tuner resumes from its cache, OpenEvolve from a checkpoint; here the run's own
records are the checkpoint. Each regime that a later regime followed is done and stays
as it was; the regime the run stopped in goes on from its best kernel so far (the latest
round that won, else its start), numbered after its last round, with the rounds it
already used taken off ``--max-iters``; the regimes after it are tuned as usual.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.shared.errors import UserError
from kernelkb.optimizer.run_file import FILE as RUN_FILE


class CannotResume(UserError):
    """The run named cannot be resumed (no such folder, finished, no kernel source)."""


@dataclass(frozen=True)
class Point:
    """Where one regime goes on from."""

    source: str  # the best kernel so far
    after: int  # the last round number the regime used
    rounds: int  # rounds (not baselines) the regime used
    note: str  # the resumed start's summary


@dataclass
class Resume:
    run_id: str
    task: str
    done: list[str] = field(default_factory=list)  # regimes finished before the stop
    points: dict[str, Point] = field(default_factory=dict)  # the regime it stopped in
    rounds_used: int = 0  # over every regime, for --max-iters


def _regime(record: ExperienceRecord) -> str:
    return record.task.regime or ""


def read_records(run_dir: Path) -> list[ExperienceRecord]:
    path = run_dir / "journal.jsonl"
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.strip():
            try:
                out.append(ExperienceRecord.model_validate_json(line))
            except ValueError:
                continue  # a line cut by the crash: the round is done again
    return out


def plan_resume(run_dir: Path, records: list[ExperienceRecord]) -> Resume:
    """What to do again, from the run's records in the order it wrote them."""
    import json

    run_id = run_dir.name
    if not run_dir.is_dir():
        raise CannotResume(f"--resume {run_id}: no run folder {run_dir}")
    try:
        status = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        status = {}
    if status.get("state") == "finished" and \
            status.get("stop_reason") not in ("interrupt", "agent_unavailable"):
        raise CannotResume(f"--resume {run_id}: the run finished "
                           f"({status.get('stop_reason') or 'report written'}); nothing "
                           "to resume")
    if not records:
        raise CannotResume(f"--resume {run_id}: its journal holds no round to go on from")
    records = sorted(records, key=lambda r: r.created_at)
    order = list(dict.fromkeys(_regime(r) for r in records))
    plan = Resume(run_id, records[0].task.task_id, done=order[:-1])
    last = order[-1]
    own = [r for r in records if _regime(r) == last and r.provenance.round_kind != "sweep"]
    if any(r.provenance.round_kind == "sweep" for r in records if _regime(r) == last):
        plan.done.append(last)  # it stopped after this regime's final sweep
    else:
        won = [r for r in own if r.verdict == "improved" or r.provenance.round_kind ==
               "baseline"]
        best = won[-1] if won else own[0]
        if not best.edit.child_source:
            raise CannotResume(f"--resume {run_id}: its records carry no kernel source to "
                               "go on from")
        after = max(r.iteration for r in own)
        plan.points[last] = Point(best.edit.child_source, after,
                                  sum(r.provenance.round_kind != "baseline" for r in own),
                                  f"resumed after round {after}: the kernel of round "
                                  f"{best.iteration} ({best.edit.summary[:80]})")
    plan.rounds_used = sum(r.provenance.round_kind not in ("baseline", "sweep")
                           for r in records)
    return plan


def resume_from(runs_dir: Path, name: str, knowledge: Any = None) -> Resume:
    """The plan for run ``name`` (a run id under ``runs_dir``, or a run folder's path),
    from its journal and the store's records of it."""
    run_dir = Path(name) if Path(name).is_dir() else Path(runs_dir) / name
    records = read_records(run_dir)
    if knowledge is not None:
        try:
            stored = _every_record(knowledge, run_dir.name)
        except Exception:  # noqa: BLE001 - a store that cannot list: the journal alone
            stored = []
        seen = {r.id for r in records}
        records += [r for r in stored if r.id not in seen]
    return plan_resume(run_dir, records)


def _every_record(knowledge: Any, run_id: str, page: int = 500) -> list[Any]:
    """Every stored record of a run, a page at a time (a service serves 500 at most)."""
    out: list[Any] = []
    offset = 0
    while True:
        got = knowledge.list(run_id=run_id, offset=offset, limit=page)
        out += got.items
        offset += page  # by pages, not records: a page's unreadable rows are skipped
        if offset >= got.total:
            return out
