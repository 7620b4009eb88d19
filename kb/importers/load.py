"""Feed one file's imported records to ingest in batches and count what happened.

Takes the ingest function (``LocalKnowledge.ingest`` or any ``IngestFn``), so kb/ does
not depend on the service that owns the store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from kernelkb.kb.importers.dispatch import Item
from kernelkb.kb.importers.records import ImportNote, ImportRejection
from kernelkb.kb.record import ExperienceRecord
from kernelkb.kb.seeds import IngestFn

BATCH = 2000
TwinsFn = Callable[[Sequence[ExperienceRecord]], set[int]]


@dataclass
class FileImport:
    source: str
    accepted: int = 0
    duplicates: int = 0
    rejected_at: set[str] = field(default_factory=set)  # "file:position" (or "file")
    problems: list[str] = field(default_factory=list)  # "file:position: field: reason"
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    skipped: str = ""  # why the whole file was skipped (records.SKIPS), else ""

    @property
    def rejected(self) -> int:
        return len(self.rejected_at)

    @property
    def seen(self) -> int:
        return self.accepted + self.duplicates + self.rejected

    @property
    def unreadable(self) -> bool:
        """The whole file was refused (not JSON, cut short, no GPU...), not one entry."""
        return self.rejected_at == {self.source} and not self.accepted + self.duplicates

    def as_dict(self) -> dict[str, object]:
        return {"source": self.source, "accepted": self.accepted,
                "duplicates": self.duplicates, "rejected": self.rejected,
                "rejections": self.problems, "notes": self.notes,
                "skipped": self.skipped or None,
                "seconds": round(self.seconds, 3)}


def load_file(source: str, items: Iterable[tuple[str, Item]], ingest: IngestFn,
              batch: int = BATCH,
              progress: Callable[[FileImport], None] | None = None,
              twins: TwinsFn | None = None) -> FileImport:
    """Ingest the file's records ``batch`` at a time; rejections keep their position.
    ``twins(records)``: the positions of records whose measurement is already stored
    (twins.stored_twins), counted as duplicates and not ingested."""
    result = FileImport(source)
    start = time.perf_counter()
    pending: list[ExperienceRecord] = []
    wheres: list[str] = []

    def flush() -> None:
        known = twins(pending) if twins is not None else set()
        fresh = [i for i in range(len(pending)) if i not in known]
        report = ingest([pending[i] for i in fresh])
        result.accepted += len(report.accepted)
        result.duplicates += len(report.duplicates) + len(known)
        for r in report.rejected:  # already validated, so not expected; kept if it happens
            where = wheres[fresh[r.index]]
            result.rejected_at.add(where)
            result.problems.append(f"{where}: {r.field}: {r.reason}")
        pending.clear()
        wheres.clear()
        result.seconds = time.perf_counter() - start
        if progress is not None:
            progress(result)

    for where, item in items:
        if isinstance(item, ImportNote):
            result.notes.append(item.message)
            result.skipped = item.skip or result.skipped
        elif isinstance(item, ImportRejection):
            result.rejected_at.add(item.where)
            result.problems.extend(item.lines())
        else:
            pending.append(item)
            wheres.append(where)
            if len(pending) >= batch:
                flush()
    if pending:
        flush()
    result.seconds = time.perf_counter() - start
    return result
