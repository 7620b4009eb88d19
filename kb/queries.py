"""Read queries on the SQL truth: get one, list with filters and paging, stats, export."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from sqlalchemy import func
from sqlmodel import Session, col, select

from kernelkb.kb.models import Experience, Hardware, Run
from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.shared.errors import UserFixable

log = logging.getLogger(__name__)

FILTER_COLUMNS = ("op_type", "task_id", "dtype", "gpu_name", "arch", "triton_version",
                  "verdict", "evidence", "run_id")


class Page(BaseModel):
    total: int
    offset: int
    limit: int
    items: list[ExperienceRecord]
    skipped: list[str] = Field(default_factory=list,
                               description="ids of rows on this page that failed to load "
                                           "(`kernelkb doctor` lists and quarantines them)")


class UnreadableRow(LookupError):
    """A stored row that no longer validates as a record."""


def load_or_skip(row: Experience, skipped: list[str] | None = None) -> ExperienceRecord | None:
    """The row's record, or None (logged, id appended to ``skipped``) when it fails to
    load: one bad row must not take a listing, an export or a retrieval down with it."""
    try:
        return row.to_record()
    except (ValidationError, ValueError) as exc:
        log.warning("skipping unreadable experience %s: %s", row.id, str(exc)[:300])
        if skipped is not None:
            skipped.append(row.id)
        return None


class AmbiguousId(UserFixable, LookupError):
    """An id prefix that more than one experience starts with."""


PREFIX_SHOWN = 3  # ids named in an ambiguous-prefix message


def get_record(session: Session, exp_id: str) -> ExperienceRecord | None:
    """The record by its id or a unique prefix of it (the CLI prints 10-character
    prefixes); None when absent; AmbiguousId for a prefix of several; UnreadableRow when
    stored but failing to load."""
    row = session.get(Experience, exp_id) or _by_prefix(session, exp_id)
    if row is None:
        return None
    record = load_or_skip(row)
    if record is None:
        raise UnreadableRow(f"experience {exp_id} is stored but fails to load; "
                            "`kernelkb doctor` lists it, `--quarantine` moves it aside")
    return record


def _by_prefix(session: Session, prefix: str) -> Experience | None:
    if not prefix:
        return None
    rows = session.exec(select(Experience).where(  # a range, so the primary key's index serves
        Experience.id >= prefix, Experience.id < prefix + "\U0010ffff")
        .order_by(Experience.id).limit(PREFIX_SHOWN + 1)).all()
    if len(rows) > 1:
        more = "" if len(rows) <= PREFIX_SHOWN else ", ..."
        raise AmbiguousId(f"id prefix {prefix!r} matches several experiences ("
                          f"{', '.join(r.id for r in rows[:PREFIX_SHOWN])}{more}): give more "
                          "characters of the id")
    return rows[0] if rows else None


def _filtered(filters: dict[str, Any], category: str | None) -> Any:
    unknown = set(filters) - set(FILTER_COLUMNS)
    if unknown:
        raise ValueError(f"unknown filters {sorted(unknown)}; known: {list(FILTER_COLUMNS)}")
    stmt = select(Experience)
    for name, value in filters.items():
        if value is not None:
            stmt = stmt.where(getattr(Experience, name) == value)
    if category:
        stmt = stmt.where(col(Experience.categories).contains(f"|{category}|", autoescape=True))
    return stmt


def list_records(
    session: Session, *, offset: int = 0, limit: int = 50, category: str | None = None,
    **filters: Any,
) -> Page:
    stmt = _filtered(filters, category)
    total = session.exec(select(func.count()).select_from(stmt.subquery())).one()
    rows = session.exec(
        stmt.order_by(col(Experience.created_at).desc(), col(Experience.id))
        .offset(offset).limit(limit)
    ).all()
    skipped: list[str] = []
    items = [r for r in (load_or_skip(row, skipped) for row in rows) if r is not None]
    return Page(total=total, offset=offset, limit=limit, items=items, skipped=skipped)


def iter_records(session: Session, batch: int = 1000,
                 skipped: list[str] | None = None) -> Iterator[ExperienceRecord]:
    """Every record in id order; rows that fail to load are skipped (ids into ``skipped``)."""
    last = ""
    while True:
        rows = session.exec(
            select(Experience).where(Experience.id > last).order_by(Experience.id).limit(batch)
        ).all()
        if not rows:
            return
        for row in rows:
            record = load_or_skip(row, skipped)
            if record is not None:
                yield record
        last = rows[-1].id


def count_experiences(session: Session) -> int:
    return session.exec(select(func.count()).select_from(Experience)).one()


def stats(session: Session) -> dict[str, Any]:
    def by(column: Any) -> dict[str, int]:
        rows = session.exec(select(column, func.count()).group_by(column)).all()
        return {str(k): int(v) for k, v in rows}

    return {
        "experiences": count_experiences(session),
        "runs": session.exec(select(func.count()).select_from(Run)).one(),
        "hardware": session.exec(select(func.count()).select_from(Hardware)).one(),
        "by_op": by(Experience.op_type),
        "by_gpu": by(Experience.gpu_name),
        "by_verdict": by(Experience.verdict),
        "by_evidence": by(Experience.evidence),
        "by_triton": by(Experience.triton_version),
    }


def list_runs(session: Session, limit: int = 500) -> list[Run]:
    """Optimization runs in the store, newest first (one row per run, kept on ingest)."""
    return list(session.exec(select(Run).order_by(col(Run.started_at).desc()).limit(limit)).all())


def get_run(session: Session, run_id: str) -> Run | None:
    return session.get(Run, run_id)


def op_gpu_counts(session: Session) -> list[tuple[str, str, int]]:
    """(gpu_name, op_type, experiences) for every pair present: the index page's grid."""
    rows = session.exec(select(Experience.gpu_name, Experience.op_type, func.count())
                        .group_by(Experience.gpu_name, Experience.op_type)).all()
    return [(str(gpu), str(op), int(n)) for gpu, op, n in rows]
