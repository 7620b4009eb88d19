"""Read queries on the SQL truth: get one, list with filters and paging, stats, export."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from sqlalchemy import func
from sqlmodel import Session, select

from kb.models import Experience, Hardware, Run
from kb.record import ExperienceRecord

FILTER_COLUMNS = ("op_type", "task_id", "dtype", "gpu_name", "arch", "triton_version",
                  "verdict", "evidence", "run_id")


class Page(BaseModel):
    total: int
    offset: int
    limit: int
    items: list[ExperienceRecord]


def get_record(session: Session, exp_id: str) -> ExperienceRecord | None:
    row = session.get(Experience, exp_id)
    return row.to_record() if row else None


def _filtered(filters: dict[str, Any], category: str | None) -> Any:
    unknown = set(filters) - set(FILTER_COLUMNS)
    if unknown:
        raise ValueError(f"unknown filters {sorted(unknown)}; known: {list(FILTER_COLUMNS)}")
    stmt = select(Experience)
    for name, value in filters.items():
        if value is not None:
            stmt = stmt.where(getattr(Experience, name) == value)
    if category:
        stmt = stmt.where(Experience.categories.contains(f"|{category}|"))
    return stmt


def list_records(
    session: Session, *, offset: int = 0, limit: int = 50, category: str | None = None,
    **filters: Any,
) -> Page:
    stmt = _filtered(filters, category)
    total = session.exec(select(func.count()).select_from(stmt.subquery())).one()
    rows = session.exec(
        stmt.order_by(Experience.created_at.desc(), Experience.id).offset(offset).limit(limit)
    ).all()
    return Page(total=total, offset=offset, limit=limit, items=[r.to_record() for r in rows])


def iter_records(session: Session, batch: int = 1000) -> Iterator[ExperienceRecord]:
    offset = 0
    while True:
        rows = session.exec(
            select(Experience).order_by(Experience.id).offset(offset).limit(batch)
        ).all()
        if not rows:
            return
        yield from (r.to_record() for r in rows)
        offset += batch


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
