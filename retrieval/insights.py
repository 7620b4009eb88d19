"""Insights: which kinds of edits worked, for an op on a GPU / arch / Triton version.

An insight is an aggregate with its evidence (count, win rate, median and best gain,
example ids), recomputed from the rows on every call, so it strengthens or weakens as
new experiences agree or disagree. Baseline rows are not edits and are left out, and so
are the CPU interpreter's untimed rows (retrieval/untimed.py) unless asked for by name.
A category's median and best are speedups vs the parent kernel (the kernel the edit
changed) over its timed wins (``gains`` of them); ``BASIS`` says so in every report.

``triton_version`` filters; ``current_triton`` keeps every version but says how much of
a category was measured under another one, and ranks a category that won only there
below those that won under the current version (retrieval/versions.py).
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from sqlalchemy import func, or_
from sqlmodel import Session, col, select

from kernelkb.kb.models import Experience, ExperienceCategory
from kernelkb.retrieval.ladder import LOSS_VERDICTS
from kernelkb.retrieval.schemas import CategoryInsight, InsightReport
from kernelkb.retrieval.untimed import asks_for_interpreter, on_hardware
from kernelkb.retrieval.versions import other_version, version_note

EXAMPLES = 3
BASIS = ("count: edits of the category (configurations measured with no parent kernel, "
         "such as imported tuning data, are not edits and are left out); wins: verdict "
         "improved (sure: of them, the wins whose interleaved comparison's 95% interval "
         "cleared the noise floor); median and best: speedup vs the parent kernel (the one "
         "the edit changed) over the timed wins; untimed CPU-interpreter rows left out")


Row = tuple[str, str, str, float | None, str, str | None]
# id, verdict, evidence, speedup, triton, confidence


def insights(
    session: Session, *, op_type: str | None = None, gpu_name: str | None = None,
    arch: str | None = None, triton_version: str | None = None,
    current_triton: str | None = None, regime: str | None = None,
) -> InsightReport:
    """``regime``: leaves out experiences measured only on shapes of other regimes (a record
    over several regimes counts for each; one of unknown regime stays)."""
    stmt = select(  # type: ignore[call-overload]  # sqlmodel's select() types 4 columns at most
        ExperienceCategory.category, Experience.id, Experience.verdict,
        Experience.evidence, Experience.speedup_vs_parent,
        Experience.triton_version, Experience.confidence).join(
        Experience, col(Experience.id) == col(ExperienceCategory.experience_id))
    for column, value in ((Experience.op_type, op_type), (Experience.gpu_name, gpu_name),
                          (Experience.arch, arch), (Experience.triton_version, triton_version)):
        if value is not None:
            stmt = stmt.where(column == value)
    if regime is not None:
        name = regime.replace("_", "\\_")  # "_" is LIKE's any-character
        stmt = stmt.where(or_(col(Experience.regime) == regime, col(Experience.regime).is_(None),
                              col(Experience.regime) == "",
                              *(col(Experience.regime).like(p, escape="\\") for p in
                                (f"{name}+%", f"%+{name}", f"%+{name}+%"))))
    stmt = stmt.where(ExperienceCategory.category != "baseline")
    if not asks_for_interpreter(gpu_name, arch):
        stmt = stmt.where(on_hardware())
    # a sweep's measurement with no parent kernel (imported tuning data) is no edit: the
    # space measurement's points are edits of the naive kernel and stay
    unparented = (col(Experience.round_kind) == "sweep") & col(Experience.parent_hash).is_(None)
    swept = stmt.where(unparented).subquery()
    sweeps = session.exec(select(func.count(func.distinct(swept.c.id)))).one()
    stmt = stmt.where(~unparented)
    groups: dict[str, list[Row]] = defaultdict(list)
    ids: set[str] = set()
    for category, exp_id, verdict, evidence, speedup, triton, sure in session.exec(stmt).all():
        groups[category].append((exp_id, verdict, evidence, speedup, triton, sure))
        ids.add(exp_id)
    out = [_aggregate(category, rows, current_triton) for category, rows in groups.items()]
    out.sort(key=lambda c: (c.wins > 0 and c.wins == c.other_version_wins, -c.wins,
                            -(c.median_speedup or 0.0), c.category))
    return InsightReport(op_type=op_type, gpu_name=gpu_name, arch=arch, regime=regime,
                         triton_version=triton_version, current_triton=current_triton,
                         total=len(ids), categories=out, basis=BASIS,
                         sweep_measurements=sweeps)


def _aggregate(category: str, rows: list[Row], current: str | None) -> CategoryInsight:
    wins = [r for r in rows if r[1] == "improved"]
    gains = [r[3] for r in wins if r[3] is not None and r[2] == "measured"]
    # same-version wins first, then by gain
    best_first = sorted(wins, key=lambda r: (other_version(r[4], current), -(r[3] or 0.0)))
    other = [r for r in rows if other_version(r[4], current)]
    return CategoryInsight(
        category=category,
        count=len(rows),
        wins=len(wins),
        significant_wins=sum(r[5] == "significant" for r in wins),
        win_rate=round(len(wins) / len(rows), 4),
        median_speedup=round(statistics.median(gains), 4) if gains else None,
        best_speedup=round(max(gains), 4) if gains else None,
        gains=len(gains),
        losses=sum(r[1] in LOSS_VERDICTS for r in rows),
        example_ids=[r[0] for r in best_first[:EXAMPLES]],
        other_version=len(other),
        other_version_wins=sum(r[1] == "improved" for r in other),
        version_note=_note(rows, other, current),
    )


def _note(rows: list[Row], other: list[Row], current: str | None) -> str | None:
    """None when every row is of the current version."""
    if not other:
        return None
    versions = sorted({r[4] for r in other})
    if len(other) == len(rows) and len(versions) == 1:
        return version_note(versions[0], current)
    return (f"{len(other)} of {len(rows)} measured on Triton {', '.join(versions)}; "
            f"current {current}")
