"""Health of the store: rows that no longer load, and drift between SQL and the vectors.

``kernelkb doctor`` lists both; ``--quarantine`` moves unreadable rows into the
``quarantinedrow`` table (record JSON and reason kept, nothing lost) and out of every
read path (experience, categories, FTS, vectors); ``--repair`` gives rows without a
vector one and drops vectors without a row (also done at start-up and by ingest).
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from pydantic import ValidationError
from sqlalchemy import delete, insert, select, text
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from kernelkb.kb.db import FTS_TABLE, lexical_enabled
from kernelkb.kb.models import Experience, ExperienceCategory, QuarantinedRow
from kernelkb.kb.record import ExperienceRecord

log = logging.getLogger(__name__)

_PAGE = 2000


def bad_rows(engine: Engine) -> list[tuple[str, str]]:
    """(id, reason) of every experience row whose JSON fails to load as a record."""
    out: list[tuple[str, str]] = []
    last = ""
    with engine.connect() as conn:
        while True:
            rows = conn.execute(select(col(Experience.id), col(Experience.record_json))
                                .where(col(Experience.id) > last).order_by(col(Experience.id))
                                .limit(_PAGE)).all()
            if not rows:
                return out
            for exp_id, record_json in rows:
                try:
                    ExperienceRecord.model_validate_json(record_json)
                except (ValidationError, ValueError) as exc:
                    out.append((exp_id, str(exc).replace("\n", " ")[:500]))
            last = rows[-1][0]


def quarantine(engine: Engine, rows: list[tuple[str, str]]) -> int:
    """Move these rows into ``quarantinedrow`` in one transaction; returns how many moved."""
    if not rows:
        return 0
    now = datetime.now(timezone.utc)
    moved = 0
    with Session(engine) as session:
        conn = session.connection()
        for exp_id, reason in rows:
            found = conn.execute(select(col(Experience.record_json))
                                 .where(col(Experience.id) == exp_id)).scalar()
            if found is None:
                continue
            if session.get(QuarantinedRow, exp_id) is None:
                conn.execute(insert(QuarantinedRow), [dict(
                    id=exp_id, record_json=found, reason=reason, quarantined_at=now)])
            conn.execute(delete(ExperienceCategory)
                         .where(col(ExperienceCategory.experience_id) == exp_id))
            if lexical_enabled(engine):
                conn.execute(text(f"DELETE FROM {FTS_TABLE} WHERE exp_id = :i"), {"i": exp_id})
            conn.execute(delete(Experience).where(col(Experience.id) == exp_id))
            moved += 1
        session.commit()
    log.warning("quarantined %d unreadable rows into table quarantinedrow", moved)
    return moved


def sql_ids(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(select(col(Experience.id))).scalars())
