"""Optimizer run folders (``kernelkb optimize``, under the store's home: run.json, report,
plots, journal) and the parts of a run the pages show: its rounds, best-so-far series,
what stopped it and its sweep.

Why here: the store keeps a run's experiences, but the run's state, its stop reason and
the sweep against the peers exist only in the folder's ``run.json`` (optimizer/run_file.py),
so the run page reads both. Folders are looked up by run id under the runs folder only; a
name that is not a plain folder name is refused.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kernelkb.kb.record import ExperienceRecord
from kernelkb.kb.settings import Settings
from kernelkb.optimizer.run_file import FILE as RUN_FILE

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
LIVE_STALE_S = 3600.0  # no record and no run.json write for this long: not live any more


@dataclass(frozen=True)
class Live:
    """A run under way: how long ago it last wrote, the candidate it evaluates now."""

    age_s: float
    candidate: dict[str, Any] | None


def safe_name(name: str) -> bool:
    """A run id or file name that cannot leave its folder."""
    return bool(_NAME.match(name)) and ".." not in name


def run_roots(settings: Settings) -> list[Path]:
    """Where run folders are: the optimizer's output folder (the store's home / runs)."""
    root = Path(settings.runs_dir)  # type: ignore[arg-type]  # set by Settings' defaults
    return [root] if root.is_dir() else []


@dataclass(frozen=True)
class RunFolder:
    run_id: str
    path: Path

    @property
    def report(self) -> Path:
        return self.path / "report.md"

    def pngs(self) -> list[str]:
        return sorted(p.name for p in self.path.glob("*.png") if safe_name(p.name))

    def file(self, name: str) -> Path | None:
        """A file of the folder by plain name (no paths), or None."""
        if not safe_name(name):
            return None
        path = self.path / name
        if path.is_symlink() or not path.is_file():  # a link could lead out of the folder
            return None
        return path

    @property
    def run_file(self) -> Path:
        return self.path / RUN_FILE

    def status(self) -> dict[str, Any]:
        """The run's run.json (optimizer/run_file.py): state, candidate, stop reason,
        sections; {} when absent or unreadable (a run folder copied without it)."""
        try:
            found = json.loads(self.run_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def last_write_age_s(self) -> float | None:
        """Seconds since the journal or run.json last changed (None: neither is here)."""
        times = [p.stat().st_mtime for p in (self.path / "journal.jsonl", self.run_file)
                 if p.is_file()]
        return max(0.0, time.time() - max(times)) if times else None

    def live(self) -> Live | None:
        """The run is under way: its run.json says running and it wrote within
        LIVE_STALE_S; None otherwise (ended, or stopped without saying so)."""
        status = self.status()
        if not status:
            return None
        age = self.last_write_age_s()
        if status.get("state", "running") != "running" or age is None or age > LIVE_STALE_S:
            return None
        candidate = status.get("candidate")
        return Live(age, candidate if isinstance(candidate, dict) else None)

    def journal_records(self) -> list[ExperienceRecord]:
        """The run's records from its journal (written when the store was not)."""
        path = self.path / "journal.jsonl"
        if not path.is_file():
            return []
        records = []
        text = path.read_text(encoding="utf-8", errors="replace")  # a write cut mid-character
        for number, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                records.append(ExperienceRecord.model_validate_json(line))
            except ValidationError as err:
                log.warning("%s:%d: not a record (%s)", path, number, str(err)[:200])
        return records

    def stop_reason(self) -> str | None:
        """What stopped the run, from its run.json (the store does not keep it)."""
        found = self.status().get("stop_reason")
        return found if isinstance(found, str) else None

    def report_sections(self) -> str:
        """The run's sweep and peer tables as Markdown (a multi-regime run: each under its
        regime's heading), as the report writer put them into run.json; '' without."""
        found = self.status().get("sections")
        return found if isinstance(found, str) else ""


def _is_run(path: Path) -> bool:
    return any((path / name).is_file() for name in ("report.md", "journal.jsonl", RUN_FILE))


def find_folder(settings: Settings, run_id: str) -> RunFolder | None:
    if not safe_name(run_id):
        return None
    for root in run_roots(settings):
        path = root / run_id
        if _is_run(path):
            return RunFolder(run_id, path)
    return None


def all_folders(settings: Settings) -> list[RunFolder]:
    """Every run folder under the roots (first root wins on a repeated id)."""
    seen: dict[str, RunFolder] = {}
    for root in run_roots(settings):
        for path in sorted(root.iterdir()):
            if path.is_dir() and safe_name(path.name) and path.name not in seen and \
                    _is_run(path):
                seen[path.name] = RunFolder(path.name, path)
    return list(seen.values())


def regime_of(record: ExperienceRecord) -> str:
    """The regime a run's record was tuned for ("" where the run recorded none: a run of
    one regime, or one from before regimes)."""
    return record.task.regime or ""


def regimes_in_order(records: list[ExperienceRecord]) -> list[str]:
    """The run's regimes in the order it tuned them (the loop tunes one after another)."""
    seen: dict[str, None] = {}
    for r in sorted(records, key=lambda r: (r.created_at, r.iteration)):
        seen.setdefault(regime_of(r), None)
    return list(seen)


def rounds_of(records: list[ExperienceRecord]) -> list[ExperienceRecord]:
    """The loop's rounds, regime after regime, each in order (a multi-regime run numbers
    each regime's rounds from 0); the final sweep records are not rounds."""
    order = {name: i for i, name in enumerate(regimes_in_order(records))}
    return sorted((r for r in records if r.provenance.round_kind != "sweep"),
                  key=lambda r: (order[regime_of(r)], r.iteration, r.created_at))


def sweeps_of(records: list[ExperienceRecord]) -> dict[str, ExperienceRecord]:
    """Each regime's final sweep record (the best kernel against the start, on the
    regime's sweep shapes), in the run's regime order."""
    out: dict[str, ExperienceRecord] = {}
    for r in sorted((r for r in records if r.provenance.round_kind == "sweep"),
                    key=lambda r: r.iteration):
        out[regime_of(r)] = r
    order = regimes_in_order(records)
    return {name: out[name] for name in order if name in out}


def _incumbents(rounds: list[ExperienceRecord]
                ) -> list[tuple[ExperienceRecord, ExperienceRecord, float]]:
    """(round, the best kernel's record, best time so far in ms) from the first timed
    start on, as the loop keeps it: the starting kernel's time, then each new best
    (verdict improved)."""
    out: list[tuple[ExperienceRecord, ExperienceRecord, float]] = []
    best: float | None = None
    holder: ExperienceRecord | None = None
    for r in rounds:
        t = r.feedback.time_ms
        starts = best is None and r.provenance.round_kind == "baseline"
        if r.evidence == "measured" and t is not None and (starts or r.verdict == "improved") \
                and (best is None or t < best):
            best, holder = t, r
        if best is not None and holder is not None:
            out.append((r, holder, best))
    return out


def best_so_far(rounds: list[ExperienceRecord]) -> list[tuple[int, float]]:
    """(iteration, best time so far in ms) over one regime's rounds; empty when nothing
    was timed on a GPU."""
    return [(r.iteration, best) for r, _, best in _incumbents(rounds)]


def best_by_regime(rounds: list[ExperienceRecord]) -> list[tuple[str, list[tuple[int, float]]]]:
    """best_so_far per regime, in the run's order: a series never crosses regimes."""
    return [(name, best_so_far([r for r in rounds if regime_of(r) == name]))
            for name in dict.fromkeys(regime_of(r) for r in rounds)]


@dataclass(frozen=True)
class RegimeFigure:
    """A regime's headline: start and best time, and which measurement they are."""

    regime: str
    rounds: int  # edits tried (the starting kernel is not one)
    start_ms: float | None
    best_ms: float | None
    basis: str  # "final sweep" (the regime's sweep shapes) or "rounds" (its tuning shapes)
    best: ExperienceRecord | None  # the record of the best kernel

    @property
    def ratio(self) -> float | None:
        if self.start_ms and self.best_ms:
            return self.start_ms / self.best_ms
        return None


def regime_figures(records: list[ExperienceRecord]) -> list[RegimeFigure]:
    """Per regime: the final sweep's start and best where it was timed (what the report's
    per-regime table says), else the start and best of the rounds."""
    rounds = rounds_of(records)
    sweeps = sweeps_of(records)
    out = []
    for name in regimes_in_order(records):
        own = [r for r in rounds if regime_of(r) == name]
        tried = sum(r.provenance.round_kind != "baseline" for r in own)
        sweep = sweeps.get(name)
        fb = sweep.feedback if sweep is not None else None
        if sweep is not None and fb is not None and sweep.evidence == "measured" and \
                fb.parent_ms and fb.time_ms:
            out.append(RegimeFigure(name, tried, fb.parent_ms, fb.time_ms, "final sweep", sweep))
            continue
        held = _incumbents(own)
        # a figure only where a round was timed besides the start: a run whose rounds'
        # figures were dropped (single figures, no interval) would read 1.00x
        if held and any(r.evidence == "measured" and r.provenance.round_kind != "baseline"
                        for r in own):  # a start only where the run timed its starting kernel
            start = held[0][2] if held[0][1].provenance.round_kind == "baseline" else None
            _, holder, best = held[-1]
            out.append(RegimeFigure(name, tried, start, best, "rounds", holder))
        elif own or sweep is not None:
            out.append(RegimeFigure(name, tried, None, None, "untimed", None))
    return out


# -- lineage: parent -> child within a regime -------------------------------------------
@dataclass
class Node:
    record: ExperienceRecord
    children: list[Node]
    best: bool = False  # the regime's best kernel at the end
    orphan: bool = False  # names a parent kernel that no earlier round of the run made


def lineage(rounds: list[ExperienceRecord], best_id: str | None = None) -> list[Node]:
    """One regime's rounds as a forest: a round's parent is the latest earlier round that
    produced its parent kernel (the incumbent when several did: a start or a win). Only
    earlier rounds can be parents, so a loop in the hashes cannot make a cycle."""
    by_hash: dict[str, list[Node]] = {}
    roots: list[Node] = []
    for r in sorted(rounds, key=lambda r: (r.iteration, r.created_at)):
        node = Node(r, [], best=r.id == best_id)
        made = by_hash.get(r.edit.parent_hash or "", [])
        earlier = [n for n in made if n.record.iteration < r.iteration]
        won = [n for n in earlier if n.record.verdict == "improved"
               or n.record.provenance.round_kind == "baseline"]
        chain = won or earlier
        parent = chain[-1] if chain else None
        if parent is None:
            node.orphan = r.edit.parent_hash is not None
            roots.append(node)
        else:
            parent.children.append(node)
        by_hash.setdefault(r.edit.child_hash, []).append(node)
    return roots


def tree_tokens(roots: list[Node]) -> list[tuple[str, Node | None]]:
    """The forest as nested-list tokens, without recursion (a run of a thousand rounds
    in a chain nests a thousand deep): ("ul"|"/ul"|"/li", None) or ("li", node)."""
    out: list[tuple[str, Node | None]] = [("ul", None)]
    stack = [iter(roots)]
    while stack:
        node = next(stack[-1], None)
        if node is None:
            stack.pop()
            out.append(("/ul", None))
            if stack:
                out.append(("/li", None))
            continue
        out.append(("li", node))
        if node.children:
            out.append(("ul", None))
            stack.append(iter(node.children))
        else:
            out.append(("/li", None))
    return out
