"""What each arm of the transfer benchmark may know, and a store the runs cannot pollute.

- cold: nothing (retrieval off);
- transfer: experiences of the OTHER tasks only (shipped seeds and the other tasks'
  measured spaces turned into experiences), with the held-out task excluded again at
  query time (``RetrievalQuery.exclude_tasks``) as a second guard;
- same-task prior: experiences of the held-out task itself, derived from the very space
  the replay scores against. NOT transfer: an upper bound on what retrieval can add when
  it knows this task on this GPU already.

A run's own write-back goes to memory, never into the shared store, so repeat 3 of an
arm cannot retrieve what repeats 0-2 learned about the held-out task.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from benchmarks.replay.space import Space
from kernelkb.kb.ingest import IngestReport
from kernelkb.kb.record import ExperienceRecord, parse_record

log = logging.getLogger(__name__)

ARMS = ("cold", "transfer", "same_task_prior")


def seed_records(seeds_dir: Path) -> list[ExperienceRecord]:
    """Every record of seeds/*.jsonl (validated; a bad line is an error naming it)."""
    records = []
    for path in sorted(Path(seeds_dir).glob("*.jsonl")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                try:
                    records.append(parse_record(json.loads(line)))
                except ValueError as err:
                    raise ValueError(f"{path}:{number}: {err}") from None
    return records


def space_records(space: Space) -> list[ExperienceRecord]:
    """The space's measured pairs as single-change experiences (space_to_seeds' rules)."""
    from benchmarks.space_to_seeds import build_records

    return build_records(json.loads(space.path.read_text()))


def arm_records(arm: str, held_out: str, spaces: list[Space],
                seeds: list[ExperienceRecord]) -> list[ExperienceRecord]:
    """The experiences an arm's store holds when ``held_out`` is the task optimized."""
    if arm == "cold":
        return []
    pool = list(seeds)
    for space in spaces:
        pool.extend(space_records(space))
    if arm == "transfer":
        chosen = [r for r in pool if r.task.task_id != held_out]
    elif arm == "same_task_prior":
        chosen = [r for r in pool if r.task.task_id == held_out]
    else:
        raise ValueError(f"unknown arm {arm!r}; known: {ARMS}")
    unique = {r.id: r for r in chosen}
    return list(unique.values())


class MemorySink:
    """Write-back target that keeps a run's records in memory (the loop needs a sink)."""

    def __init__(self) -> None:
        self.records: list[ExperienceRecord] = []

    def ingest(self, records: list[ExperienceRecord]) -> IngestReport:
        self.records.extend(records)
        return IngestReport(accepted=[r.id for r in records])


class HeldOutKnowledge(MemorySink):
    """Read from a shared store with tasks excluded at query time; write to memory only."""

    def __init__(self, store: Any, exclude_tasks: list[str]) -> None:
        super().__init__()
        self.store, self.exclude_tasks = store, list(exclude_tasks)

    def retrieve(self, query: Any) -> Any:
        excluded = sorted({*query.exclude_tasks, *self.exclude_tasks})
        return self.store.retrieve(query.model_copy(update={"exclude_tasks": excluded}))

    def insights(self, **kwargs: Any) -> Any:
        return self.store.insights(**kwargs)

    def bootstrap(self, env: dict[str, Any], op_type: str | None = None,
                  include_own: bool = False, **kwargs: Any) -> Any:
        """The store holds no record of an excluded task (``arm_records``), so its plan
        cannot name one of its configurations."""
        return self.store.bootstrap(env, op_type=op_type, include_own=include_own, **kwargs)


def build_store(root: Path, records: list[ExperienceRecord], embedder: Any) -> Any:
    """A real LocalKnowledge (SQLite file + Chroma folder under ``root``) holding records."""
    from kernelkb.kb.settings import Settings
    from kernelkb.service import LocalKnowledge

    settings = Settings(data_dir=root, seeds_dir=root / "no-seeds", service_url=None)
    store = LocalKnowledge(settings, embedder=embedder)
    if records:
        report = store.ingest(records)
        if report.rejected:
            raise ValueError(f"store {root}: {len(report.rejected)} records rejected, first: "
                             f"{report.rejected[0]}")
    log.info("store %s: %d experiences", root.name, len(records))
    return store
