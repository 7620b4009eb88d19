"""Every round's experience goes back: to the store, to the service, or to a journal.

The sink is anything with ``ingest(records)`` (``LocalKnowledge`` in-process, or
``RemoteKnowledge`` over HTTP). When the service cannot be reached (a bare GPU host),
records go to an append-only JSONL journal instead, one full record per line; their ids
are content hashes, so ``kernelkb ingest JOURNAL`` loads them later and loading twice
stores once. Nothing is lost: a record is journaled whenever the sink did not take it.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Protocol

from kernelkb.kb.record import ExperienceRecord, parse_record

log = logging.getLogger(__name__)


class Sink(Protocol):
    def ingest(self, records: list[ExperienceRecord]) -> Any:
        """A report whose ``accepted`` and ``duplicates`` hold the ids stored (and
        ``rejected`` the refusals): a record not among them is journaled."""


def unavailable_errors() -> tuple[type[BaseException], ...]:
    """Exceptions meaning 'the service is not there' (not 'the record is bad')."""
    errors: list[type[BaseException]] = [ConnectionError, TimeoutError]
    try:
        from kernelkb.retrieval.remote import ServiceUnavailable

        errors.append(ServiceUnavailable)
    except ImportError:  # a bare GPU host without the retrieval package's dependencies
        pass
    try:
        import httpx

        errors.append(httpx.TransportError)
    except ImportError:
        pass
    return tuple(errors)


class Journal:
    """Append-only JSONL of full records; flushed and fsynced per line."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def append(self, record: ExperienceRecord) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(record.model_dump_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def read(self) -> list[ExperienceRecord]:
        """Every complete record; a torn last line (a crash mid-write) is skipped."""
        if not self.path.exists():
            return []
        records = []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                records.append(parse_record(json.loads(line)))
            except json.JSONDecodeError:
                if number != len(lines):
                    raise ValueError(f"{self.path}:{number}: not JSON") from None
                log.warning("%s:%d: torn last line skipped", self.path, number)
        return records


class Writeback:
    """Write each record to the sink; on an outage, to the journal for the rest of the run.

    Once the service is found down it is not retried in this run (each try would cost a
    connection timeout per round); the journal is loaded later with ``kernelkb ingest``.
    """

    def __init__(self, sink: Sink | None, journal: Journal) -> None:
        self.sink = sink
        self.journal = journal
        self.sink_down = sink is None
        self.stored = 0
        self.journaled = 0
        self.kinds: dict[str, int] = {}  # round kinds of the records written, for the summary

    def write(self, record: ExperienceRecord) -> str:
        """'stored' or 'journaled'; a record is never dropped."""
        kind = {"baseline": "baselines", "sweep": "final sweeps"}.get(
            record.provenance.round_kind, "rounds")
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        if not self.sink_down and self.sink is not None:
            try:
                report = self.sink.ingest([record])
                if record.id in (*report.accepted, *report.duplicates):
                    self.stored += 1
                    return "stored"
                log.warning("the store refused experience %s (%s); journaling it to %s",
                            record.id, "; ".join(f"{r.field}: {r.reason}"
                                                 for r in report.rejected), self.journal.path)
            except unavailable_errors() as err:
                self.sink_down = True
                log.warning("knowledge service unreachable (%s); journaling to %s",
                            err, self.journal.path)
        self.journal.append(record)
        self.journaled += 1
        return "journaled"

    def summary(self) -> str:
        """"6 records (3 rounds, 3 baselines): 0 experiences stored, 6 journaled to ...":
        what the records are, so the count agrees with the rounds said before it."""
        text = f"{self.stored} experiences stored"
        if self.journaled:
            text += (f", {self.journaled} journaled to {self.journal.path} "
                     f"(load them with: kernelkb ingest {self.journal.path})")
        total = sum(self.kinds.values())
        return f"{total} records ({self.kinds_text()}): {text}" if total else text

    def kinds_text(self) -> str:
        order = ("rounds", "baselines", "final sweeps")
        return ", ".join(f"{self.kinds[k]} {k if self.kinds[k] != 1 else k[:-1]}"
                         for k in order if self.kinds.get(k))
