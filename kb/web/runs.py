"""Optimizer run folders (``kernelkb optimize --out``; report.md, plots, journal) and the
parts of a run the pages show: its rounds, best-so-far series and the report's sweep.

Why here: the store keeps a run's experiences, but the sweep against the peers exists
only in the folder's report.md, so the run page reads both. Folders are looked up by
run id under known roots only; a name that is not a plain folder name is refused.
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

from kb.record import ExperienceRecord
from kb.settings import REPO_ROOT, Settings

log = logging.getLogger(__name__)

SHIPPED_RUNS = REPO_ROOT / "benchmarks" / "runs"  # the H200 runs the README quotes
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
REPORT_SECTIONS = ("## Shape sweep", "## Against the peers")
_STOPPED = re.compile(r"stopped by \*\*([\w-]+)\*\*")
_REGIME_SECTION = re.compile(r"^# Regime ", re.M)  # optimizer/report.py, one per regime


LIVE_FILE = "live.json"  # optimizer/live.py: the candidate being evaluated, the state
LIVE_STALE_S = 3600.0  # no record and no live.json write for this long: not live any more


@dataclass(frozen=True)
class Live:
    """A run under way: how long ago it last wrote, the candidate it evaluates now."""

    age_s: float
    candidate: dict[str, Any] | None


def safe_name(name: str) -> bool:
    """A run id or file name that cannot leave its folder."""
    return bool(_NAME.match(name)) and ".." not in name


def run_roots(settings: Settings) -> list[Path]:
    """Where run folders are: the optimizer's output folder, then the shipped runs."""
    roots = [Path(settings.runs_dir), SHIPPED_RUNS]
    out: list[Path] = []
    for root in roots:
        if root.is_dir() and root.resolve() not in {r.resolve() for r in out}:
            out.append(root)
    return out


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
    def live_file(self) -> Path:
        return self.path / LIVE_FILE

    def live_status(self) -> dict[str, Any]:
        """The loop's live.json (optimizer/live.py): state, candidate; {} when absent or
        unreadable (a run from before it, a run folder copied without it)."""
        try:
            found = json.loads(self.live_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def last_write_age_s(self) -> float | None:
        """Seconds since the journal or live.json last changed (None: neither is here)."""
        times = [p.stat().st_mtime for p in (self.path / "journal.jsonl", self.live_file)
                 if p.is_file()]
        return max(0.0, time.time() - max(times)) if times else None

    def live(self) -> Live | None:
        """The run is under way: no report yet, the loop has not said it ended, and it
        wrote within LIVE_STALE_S; None otherwise (done, or stopped without a report)."""
        if self.report.is_file():
            return None
        status = self.live_status()
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
        """What stopped the run, as its report says (the store does not keep it)."""
        if not self.report.is_file():
            return None
        found = _STOPPED.search(self.report.read_text(encoding="utf-8", errors="replace"))
        return found.group(1) if found else None

    def report_sections(self) -> str:
        """report.md from the shape sweep on (the sweep and the peers; a multi-regime
        report: from its first regime's section, so each sweep sits under its regime's
        heading), without its image lines (the page shows the images itself); '' without
        a report."""
        if not self.report.is_file():
            return ""
        text = self.report.read_text(encoding="utf-8", errors="replace")
        regime = _REGIME_SECTION.search(text)
        starts = [text.find(h) for h in REPORT_SECTIONS if h in text] + \
            ([regime.start()] if regime else [])
        if not starts:
            return ""
        body = text[min(starts):]
        return "\n".join(line for line in body.splitlines() if not line.startswith("!["))


def _is_run(path: Path) -> bool:
    return any((path / name).is_file() for name in ("report.md", "journal.jsonl", LIVE_FILE))


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
        if held:  # a start only where the run timed its starting kernel
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
        parent = (won or earlier or [None])[-1]
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
