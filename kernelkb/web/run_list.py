"""The rows of /ui/runs: the user's own runs (a folder under the runs folder) first,
newest first, then the store's other runs (seeds, imports).

Why: a CPU run keeps its rounds in its journal, not the store, so a list built from the
store alone showed the user's own runs last with task, hardware and date blank. Here a
folder-only run is summarised from its journal (else its run.json), and "report" says
whether a report.md was written, so a run that crashed is not read as written up.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from kernelkb.web.runs import RunFolder


@dataclass
class RunRow:
    run_id: str
    task: str = ""
    op: str = ""
    gpu: str = ""  # "NVIDIA H200 (sm_90)", or the store's hardware id
    triton: str = ""
    agent: str = ""
    started: datetime | None = None
    rounds: int | None = None
    best: float | None = None  # best measured speedup vs the reference
    stored: Any = None  # the store's Run row, if any
    folder: RunFolder | None = None

    @property
    def own(self) -> bool:
        return self.folder is not None

    def report_state(self) -> str:
        """written (report.md is there), running, crashed (run.json says failed, or the
        folder stopped without a report), or "" (no folder here)."""
        if self.folder is None:
            return ""
        if self.folder.report.is_file():
            return "written"
        if self.folder.live() is not None:
            return "running"
        return "crashed"


def _aware(when: datetime | None) -> datetime | None:
    if when is not None and when.tzinfo is None:
        return when.replace(tzinfo=timezone.utc)
    return when


def from_store(run: Any, folder: RunFolder | None) -> RunRow:
    gpu, _, arch = str(run.hardware_id).rpartition("|")
    return RunRow(run.run_id, run.task_id, run.op_type, f"{gpu} ({arch})" if gpu else
                  str(run.hardware_id), run.triton_version,
                  run.agent + (f" ({run.model})" if run.model else ""),
                  _aware(run.started_at), run.iterations, run.best_speedup, run, folder)


def from_folder(folder: RunFolder) -> RunRow:
    """A run whose records are only in its folder: its journal's first record gives the
    task, hardware and start; else run.json's task and the folder's time."""
    row = RunRow(folder.run_id, folder=folder)
    records = folder.journal_records()
    if records:
        first = min(records, key=lambda r: r.created_at)
        row.task, row.op = first.task.task_id, first.task.op_type
        row.gpu = f"{first.env.gpu_name} ({first.env.arch})"
        row.triton = first.env.triton_version
        row.agent = first.provenance.agent + (f" ({first.provenance.model})"
                                              if first.provenance.model else "")
        row.started = _aware(first.created_at)
        row.rounds = sum(r.provenance.round_kind not in ("baseline", "sweep") for r in records)
        timed = [r.feedback.speedup_vs_baseline for r in records
                 if r.evidence == "measured" and r.feedback.speedup_vs_baseline]
        row.best = max(timed) if timed else None
        return row
    status = folder.status()
    row.task = str(status.get("task") or "")
    try:
        row.started = datetime.fromtimestamp(folder.path.stat().st_mtime, timezone.utc)
    except OSError:
        pass
    return row


def run_rows(stored: list[Any], folders: dict[str, RunFolder]) -> list[RunRow]:
    """Own runs (with a folder here) first, then the rest; each group newest first."""
    rows = [from_store(r, folders.get(r.run_id)) for r in stored]
    known = {r.run_id for r in stored}
    rows += [from_folder(f) for run_id, f in folders.items() if run_id not in known]
    return sorted(rows, key=lambda r: (not r.own, -r.started.timestamp() if r.started
                                       else float("inf"), r.run_id))
