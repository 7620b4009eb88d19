"""Ingest: validate every record, store the good ones in SQL, index them in Chroma.

Idempotent: ids are content hashes and existing ids are skipped (reported as
duplicates). A bad record never sinks its batch: it is reported with its index, the
dotted field path and pydantic's reason, and the good records of the batch are stored.
Order: validate -> embed what looks new (outside any lock) -> 1. one SQL transaction as
the only writer (``begin_write``: the id check and the inserts cannot interleave with
another process) -> 2. vectors, under the folder's writer lock. SQL is the truth and is
written first, so a crash can only leave rows without vectors: the next ingest of those
records gives them vectors, and ``sync_index`` (start-up, ``kernelkb ingest``, ``doctor
--repair``) repairs any drift either way.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, ValidationError
from sqlalchemy import insert
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, StatementError
from sqlmodel import Session, col, select

from kernelkb.kb.crashpoints import crash_point
from kernelkb.kb.db import add_lexical_rows, begin_write, lexical_row
from kernelkb.kb.embedder import Embedder
from kernelkb.kb.limits import SHORT, printable
from kernelkb.kb.models import (
    Experience,
    ExperienceCategory,
    Hardware,
    KernelSource,
    Run,
    experience_values,
    hardware_id,
    hardware_row,
    kernel_row,
)
from kernelkb.kb.queries import iter_records, load_or_skip
from kernelkb.kb.record import ExperienceRecord, parse_record
from kernelkb.kb.vector_index import VectorIndex

log = logging.getLogger(__name__)

_IN_CHUNK = 500
# what a database raises for a value it refuses (an OperationalError, also a StatementError,
# is the database itself failing and is raised before these are caught)
REFUSED_VALUES = (StatementError, ValueError, OverflowError, TypeError)


class Rejection(BaseModel):
    index: int = Field(description="position of the record in the batch (0-based)")
    field: str = Field(description="dotted path of the offending field, '<record>' if none")
    reason: str


class IngestReport(BaseModel):
    accepted: list[str] = Field(default_factory=list, description="ids newly stored")
    duplicates: list[str] = Field(default_factory=list, description="ids already present")
    rejected: list[Rejection] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.rejected

    def merge(self, other: IngestReport, offset: int = 0) -> None:
        self.accepted += other.accepted
        self.duplicates += other.duplicates
        self.rejected += [r.model_copy(update={"index": r.index + offset}) for r in other.rejected]


class IndexStaleError(RuntimeError):
    """SQL holds the records but the vector index could not be updated."""


def validate_batch(items: Sequence[Any]) -> tuple[list[ExperienceRecord], list[Rejection]]:
    """Parse each item (dict or JSON text; an ExperienceRecord is already valid); collect
    field-level rejections."""
    good, bad, _ = _validate(items)
    return good, bad


def _validate(items: Sequence[Any]
              ) -> tuple[list[ExperienceRecord], list[Rejection], dict[str, int]]:
    """``validate_batch``, and the batch position of each good record by id."""
    good: list[ExperienceRecord] = []
    bad: list[Rejection] = []
    where: dict[str, int] = {}
    for index, item in enumerate(items):
        if isinstance(item, ExperienceRecord):  # validated when it was built
            good.append(item)
            where.setdefault(item.id or "", index)
            continue
        try:
            data = json.loads(_utf8(item)) if isinstance(item, str | bytes) else item
        except json.JSONDecodeError as exc:
            bad.append(Rejection(index=index, field="<record>", reason=f"invalid JSON: {exc}"))
            continue
        except UnicodeDecodeError as exc:
            bad.append(Rejection(index=index, field="<record>",
                                 reason=f"not UTF-8 text: {printable(str(exc))}"))
            continue
        except RecursionError:
            bad.append(Rejection(index=index, field="<record>",
                                 reason="invalid JSON: nested too deeply"))
            continue
        if not isinstance(data, dict):
            reason = f"expected a JSON object, got {type(data).__name__}"
            bad.append(Rejection(index=index, field="<record>", reason=reason))
            continue
        try:
            good.append(parse_record(data))
            where.setdefault(good[-1].id or "", index)
        except ValidationError as exc:
            for err in exc.errors():
                field = ".".join(str(part) for part in err["loc"]) or "<record>"
                bad.append(Rejection(index=index, field=printable(field, SHORT),
                                     reason=printable(err["msg"])))
        except (RecursionError, ValueError, TypeError) as exc:  # not a record at all
            bad.append(Rejection(index=index, field="<record>", reason=printable(str(exc))))
    return good, bad, where


def _utf8(item: str | bytes) -> str:
    """JSON text; bytes must be UTF-8 (json.loads would also guess UTF-16 and -32)."""
    return item if isinstance(item, str) else item.decode("utf-8")


def existing_ids(session: Session, ids: Iterable[str]) -> set[str]:
    ids = list(ids)
    found: set[str] = set()
    for start in range(0, len(ids), _IN_CHUNK):
        chunk = ids[start : start + _IN_CHUNK]
        found.update(session.exec(select(Experience.id)
                                  .where(col(Experience.id).in_(chunk))).all())
    return found


def split_new(
    session: Session, records: Sequence[ExperienceRecord]
) -> tuple[list[ExperienceRecord], list[str]]:
    """New records (first copy of each id) and the ids that are duplicates."""
    present = existing_ids(session, (r.id for r in records if r.id))
    new: list[ExperienceRecord] = []
    duplicates: list[str] = []
    seen: set[str] = set()
    for record in records:
        assert record.id is not None
        if record.id in present or record.id in seen:
            duplicates.append(record.id)
        else:
            seen.add(record.id)
            new.append(record)
    return new, duplicates


def store_records(session: Session, records: Sequence[ExperienceRecord],
                  regime_of: Callable[[ExperienceRecord], str | None] | None = None) -> None:
    """Add rows for new records (caller commits): experience, categories, FTS, hardware,
    kernel sources, runs.

    Experience and category rows go in as one Core executemany each (ORM objects cost
    ~0.2 ms a record, a tenth of the ingest budget); hardware and runs, a few per batch,
    are merged through the ORM once per key, not once per record."""
    if not records:
        return
    conn = session.connection()
    conn.execute(insert(Experience), [experience_values(r, regime_of) for r in records])
    categories = [{"experience_id": r.id, "category": c}
                  for r in records for c in r.edit.categories]
    if categories:
        conn.execute(insert(ExperienceCategory), categories)
    by_hardware: dict[str, list[ExperienceRecord]] = defaultdict(list)
    by_run: dict[str, list[ExperienceRecord]] = defaultdict(list)
    kernels: dict[str, KernelSource] = {}
    for record in records:
        by_hardware[hardware_id(record.env.gpu_name, record.env.arch)].append(record)
        by_run[record.run_id].append(record)
        kernel = kernel_row(record)
        if kernel is not None:
            kernels.setdefault(kernel.hash, kernel)
    for hid, group in by_hardware.items():
        _merge_hardware(session, hid, group)
    for run_id, group in by_run.items():
        _merge_run(session, run_id, group)
    for kernel in kernels.values():
        if session.get(KernelSource, kernel.hash) is None:
            session.add(kernel)
    add_lexical_rows(session, map(lexical_row, records))


def _merge_hardware(session: Session, hid: str, group: list[ExperienceRecord]) -> None:
    """Add the fingerprint, or fill the fields it lacks from these records."""
    current = session.get(Hardware, hid)
    if current is None:
        current = hardware_row(group[0])
        session.add(current)
    for name in ("sm_count", "mem_bandwidth_gbps", "smem_per_sm_kib", "peak_tflops"):
        if getattr(current, name) is None:
            value = next((getattr(r.env, name) for r in group
                          if getattr(r.env, name) is not None), None)
            if value is not None:
                setattr(current, name, value)


def _merge_run(session: Session, run_id: str, group: list[ExperienceRecord]) -> None:
    """Create or extend the run's summary: iterations, time span, best measured speedup."""
    run = session.get(Run, run_id)
    first = group[0]
    if run is None:
        run = Run(
            run_id=run_id,
            task_id=first.task.task_id,
            op_type=first.task.op_type,
            hardware_id=hardware_id(first.env.gpu_name, first.env.arch),
            triton_version=first.env.triton_version,
            agent=first.provenance.agent,
            model=first.provenance.model,
            started_at=first.created_at,
            finished_at=first.created_at,
            iterations=0,
        )
        session.add(run)
    run.iterations = max(run.iterations, *(r.iteration + 1 for r in group))
    run.started_at = min(run.started_at, *(r.created_at for r in group))
    run.finished_at = max(run.finished_at, *(r.created_at for r in group))
    speedups = [r.feedback.speedup_vs_baseline for r in group if r.evidence == "measured"
                and r.feedback.speedup_vs_baseline is not None]
    if speedups and (run.best_speedup is None or max(speedups) > run.best_speedup):
        run.best_speedup = max(speedups)


def index_records(
    index: VectorIndex, records: Sequence[ExperienceRecord], vectors: np.ndarray
) -> None:
    """Ids and vectors only: the filters run in SQL, so Chroma metadata would be written
    and never read (five fields cost ~0.15 ms a record, 5% of the ingest time)."""
    try:
        index.upsert([r.id or "" for r in records], vectors)
    except Exception as exc:
        raise IndexStaleError(
            f"{len(records)} records are stored in SQL but not indexed ({exc}); "
            "run `kernelkb reindex`"
        ) from exc


def ingest(
    engine: Engine, embedder: Embedder | None, index: VectorIndex | None, items: Sequence[Any],
    regime_of: Callable[[ExperienceRecord], str | None] | None = None,
) -> IngestReport:
    """Validate, store and index one batch; see the module docstring for the order.
    Without an embedder and index (vectors off) the records go to SQL only. ``regime_of``
    derives the regime column of records that carry none."""
    records, rejected, where = _validate(items)
    with Session(engine) as session:  # a first look, unlocked: what is worth embedding
        maybe_new, _ = split_new(session, records)
    vectors = {}
    if embedder is not None and maybe_new:
        embedded = embedder.embed([r.embedding_text() for r in maybe_new])
        vectors = {r.id: v for r, v in zip(maybe_new, embedded, strict=True)}
    try:  # 1. SQL, the truth: one writer at a time
        new, duplicates = _store(engine, records, regime_of)
    except OperationalError:  # locked, full, gone: not the records' fault
        raise
    except REFUSED_VALUES as exc:
        # a value the schema let through and the database refuses: find it, keep the rest
        log.warning("ingest: the database refused the batch (%s); storing record by "
                    "record", printable(str(exc), 300))
        new, duplicates, refused = _store_each(engine, records, regime_of)
        rejected = sorted(rejected + [
            Rejection(index=where.get(r.id or "", -1), field="<record>",
                      reason=f"the database refused it: {printable(reason, 500)}")
            for r, reason in refused], key=lambda r: r.index)
    crash_point("ingest.after_sql")
    if index is not None and embedder is not None:  # 2. vectors, derived and repairable
        _index_new_and_lacking(index, embedder, new, records, duplicates, vectors)
    crash_point("ingest.after_vectors")
    log.info("ingest: %d accepted, %d duplicates, %d rejections",
             len(new), len(duplicates), len(rejected))
    return IngestReport(
        accepted=[r.id or "" for r in new], duplicates=duplicates, rejected=rejected
    )


def _store(engine: Engine, records: Sequence[ExperienceRecord],
           regime_of: Callable[[ExperienceRecord], str | None] | None,
           ) -> tuple[list[ExperienceRecord], list[str]]:
    """One transaction: the new records' rows, committed; (new, duplicate ids)."""
    with Session(engine) as session:
        begin_write(session)
        new, duplicates = split_new(session, records)
        store_records(session, new, regime_of)
        session.commit()
    return new, duplicates


def _store_each(engine: Engine, records: Sequence[ExperienceRecord],
                regime_of: Callable[[ExperienceRecord], str | None] | None,
                ) -> tuple[list[ExperienceRecord], list[str], list[tuple[ExperienceRecord, str]]]:
    """Each record in a transaction of its own (after a batch failed): (new, duplicate ids,
    (record, why) for those the database refused)."""
    new: list[ExperienceRecord] = []
    duplicates: list[str] = []
    refused: list[tuple[ExperienceRecord, str]] = []
    for record in records:
        try:
            stored, again = _store(engine, [record], regime_of)
        except OperationalError:
            raise
        except REFUSED_VALUES as exc:
            refused.append((record, str(exc).splitlines()[0] if str(exc) else repr(exc)))
            continue
        new += stored
        duplicates += again
    return new, duplicates, refused


def _index_new_and_lacking(index: VectorIndex, embedder: Embedder,
                           new: Sequence[ExperienceRecord], records: Sequence[ExperienceRecord],
                           duplicates: Sequence[str], vectors: dict[Any, np.ndarray]) -> None:
    """Vectors for the new rows, and for duplicates whose row has none (an earlier ingest
    killed between its SQL commit and its vector write)."""
    with index.writing():
        fresh = {r.id for r in new}  # a record twice in one batch: new once, then duplicate
        lacking = set(index.missing(sorted(set(duplicates) - fresh)))
        todo = list(new) + list({r.id: r for r in records if r.id in lacking}.values())
        if not todo:
            return
        need = [r for r in todo if r.id not in vectors]
        if need:
            vectors.update(zip([r.id for r in need],
                               embedder.embed([r.embedding_text() for r in need]), strict=True))
        if lacking:
            log.warning("ingest: %d stored records had no vector; indexed now", len(lacking))
        index_records(index, todo, np.stack([vectors[r.id] for r in todo]))


def sync_index(engine: Engine, embedder: Embedder, index: VectorIndex,
               batch: int = 512) -> tuple[int, int]:
    """Repair drift after a crash: rows without a vector get one, vectors without a row
    go. Returns (added, removed). Cheap when nothing drifted (two id scans).

    Vector ids are read before row ids: rows are committed before their vectors, so a
    vector read first has its row in the later read, and one written in between by a
    writer outside the lock is never taken for an orphan."""
    with index.writing():
        vectors = index.all_ids()
        with Session(engine) as session:
            rows = set(session.exec(select(Experience.id)).all())
        orphans = sorted(vectors - rows)
        if orphans:
            index.delete(orphans)
        lacking = sorted(rows - vectors)
        added = 0
        with Session(engine) as session:
            for start in range(0, len(lacking), batch):
                chunk = lacking[start : start + batch]
                found = session.exec(select(Experience)
                                     .where(col(Experience.id).in_(chunk))).all()
                records = [r for r in map(load_or_skip, found) if r is not None]
                added += _index_batch(index, embedder, records)
    if orphans or added:
        log.warning("index repaired: %d vectors added, %d orphan vectors removed",
                    added, len(orphans))
    return added, len(orphans)


def reindex(engine: Engine, embedder: Embedder, index: VectorIndex, batch: int = 512,
            on_batch: Callable[[int], None] | None = None) -> int:
    """Rebuild the vector index from SQL beside the live one, then swap (kb/vector_index.py:
    readers never see an empty index); returns the number indexed. ``on_batch(n)`` after
    each batch is embedded (a progress bar)."""
    skipped: list[str] = []

    def batches():  # type: ignore[no-untyped-def]
        with Session(engine) as session:
            pending: list[ExperienceRecord] = []
            for record in iter_records(session, batch=batch, skipped=skipped):
                pending.append(record)
                if len(pending) == batch:
                    yield _embedded(embedder, pending)
                    if on_batch:
                        on_batch(len(pending))
                    crash_point("reindex.batch")
                    pending = []
            if pending:
                yield _embedded(embedder, pending)
                if on_batch:
                    on_batch(len(pending))

    with index.writing():
        done = index.rebuild(batches())
    if skipped:
        log.warning("reindex: %d unreadable rows skipped (`kernelkb doctor` lists them)",
                    len(skipped))
    log.info("reindex: %d vectors", done)
    return done


def _embedded(embedder: Embedder, records: list[ExperienceRecord]) -> tuple[list[str], np.ndarray]:
    return [r.id or "" for r in records], embedder.embed([r.embedding_text() for r in records])


def _index_batch(index: VectorIndex, embedder: Embedder, records: list[ExperienceRecord]) -> int:
    if records:
        index_records(index, records, embedder.embed([r.embedding_text() for r in records]))
    return len(records)
