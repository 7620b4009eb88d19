"""Insights: which kinds of edits worked, for an op on a GPU / arch / Triton version.

An insight is an aggregate with its evidence (count, win rate, median and best gain,
example ids), recomputed from the rows on every call, so it strengthens or weakens as
new experiences agree or disagree. Baseline rows are not edits and are left out.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from sqlmodel import Session, select

from kb.models import Experience, ExperienceCategory
from retrieval.ladder import LOSS_VERDICTS
from retrieval.schemas import CategoryInsight, InsightReport

EXAMPLES = 3


def insights(
    session: Session, *, op_type: str | None = None, gpu_name: str | None = None,
    arch: str | None = None, triton_version: str | None = None,
) -> InsightReport:
    stmt = select(ExperienceCategory.category, Experience.id, Experience.verdict,
                  Experience.evidence, Experience.speedup_vs_parent).join(
        Experience, Experience.id == ExperienceCategory.experience_id)
    for column, value in ((Experience.op_type, op_type), (Experience.gpu_name, gpu_name),
                          (Experience.arch, arch), (Experience.triton_version, triton_version)):
        if value is not None:
            stmt = stmt.where(column == value)
    stmt = stmt.where(ExperienceCategory.category != "baseline")
    groups: dict[str, list[tuple[str, str, str, float | None]]] = defaultdict(list)
    ids: set[str] = set()
    for category, exp_id, verdict, evidence, speedup in session.exec(stmt).all():
        groups[category].append((exp_id, verdict, evidence, speedup))
        ids.add(exp_id)
    out = [_aggregate(category, rows) for category, rows in groups.items()]
    out.sort(key=lambda c: (-c.wins, -(c.median_speedup or 0.0), c.category))
    return InsightReport(op_type=op_type, gpu_name=gpu_name, arch=arch,
                         triton_version=triton_version, total=len(ids), categories=out)


def _aggregate(category: str, rows: list[tuple[str, str, str, float | None]]) -> CategoryInsight:
    wins = [r for r in rows if r[1] == "improved"]
    gains = [r[3] for r in wins if r[3] is not None and r[2] == "measured"]
    best_first = sorted(wins, key=lambda r: -(r[3] or 0.0))
    return CategoryInsight(
        category=category,
        count=len(rows),
        wins=len(wins),
        win_rate=round(len(wins) / len(rows), 4),
        median_speedup=round(statistics.median(gains), 4) if gains else None,
        best_speedup=round(max(gains), 4) if gains else None,
        losses=sum(r[1] in LOSS_VERDICTS for r in rows),
        example_ids=[r[0] for r in best_first[:EXAMPLES]],
    )
