"""Optimizer run folders (``kernelkb optimize --out``; report.md, plots, journal) and the
parts of a run the pages show: its rounds, best-so-far series and the report's sweep.

Why here: the store keeps a run's experiences, but the sweep against the peers exists
only in the folder's report.md, so the run page reads both. Folders are looked up by
run id under known roots only; a name that is not a plain folder name is refused.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from kb.record import ExperienceRecord
from kb.settings import REPO_ROOT, Settings

log = logging.getLogger(__name__)

SHIPPED_RUNS = REPO_ROOT / "benchmarks" / "runs"  # the H200 runs the README quotes
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
REPORT_SECTIONS = ("## Shape sweep", "## Against the peers")
_STOPPED = re.compile(r"stopped by \*\*([\w-]+)\*\*")


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
        """report.md from the shape sweep on (the sweep and the peers), without its
        image lines (the page shows the images itself); '' without a report."""
        if not self.report.is_file():
            return ""
        text = self.report.read_text(encoding="utf-8", errors="replace")
        starts = [text.find(h) for h in REPORT_SECTIONS if h in text]
        if not starts:
            return ""
        body = text[min(starts):]
        return "\n".join(line for line in body.splitlines() if not line.startswith("!["))


def find_folder(settings: Settings, run_id: str) -> RunFolder | None:
    if not safe_name(run_id):
        return None
    for root in run_roots(settings):
        path = root / run_id
        if (path / "report.md").is_file() or (path / "journal.jsonl").is_file():
            return RunFolder(run_id, path)
    return None


def all_folders(settings: Settings) -> list[RunFolder]:
    """Every run folder under the roots (first root wins on a repeated id)."""
    seen: dict[str, RunFolder] = {}
    for root in run_roots(settings):
        for path in sorted(root.iterdir()):
            if path.is_dir() and safe_name(path.name) and path.name not in seen and \
                    ((path / "report.md").is_file() or (path / "journal.jsonl").is_file()):
                seen[path.name] = RunFolder(path.name, path)
    return list(seen.values())


def rounds_of(records: list[ExperienceRecord]) -> list[ExperienceRecord]:
    """The loop's rounds in order (the final sweep record is not a round)."""
    return sorted((r for r in records if r.provenance.round_kind != "sweep"),
                  key=lambda r: r.iteration)


def sweep_of(records: list[ExperienceRecord]) -> ExperienceRecord | None:
    sweeps = [r for r in records if r.provenance.round_kind == "sweep"]
    return max(sweeps, key=lambda r: r.iteration) if sweeps else None


def best_so_far(rounds: list[ExperienceRecord]) -> list[tuple[int, float]]:
    """(iteration, best time so far in ms), as the loop keeps it: the starting kernel's
    time, then each new best (verdict improved); empty when nothing was timed on a GPU."""
    points: list[tuple[int, float]] = []
    best: float | None = None
    for r in rounds:
        t = r.feedback.time_ms
        starts = best is None and r.provenance.round_kind == "baseline"
        if r.evidence == "measured" and t is not None and (starts or r.verdict == "improved"):
            best = t if best is None else min(best, t)
        if best is not None:
            points.append((r.iteration, best))
    return points
