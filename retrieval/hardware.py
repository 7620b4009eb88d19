"""Hardware similarity and the bootstrap plan for a GPU with no experiences.

Similarity of two fingerprints is a weighted sum over architecture (same sm_XY > same
major generation > other), SM count, memory bandwidth and shared memory per SM (ratios of
the smaller to the larger value; an unknown value counts as a half match). The plan takes
the most similar known hardware and lists the edit kinds and concrete configs that won
there, each with its evidence, best first.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, select

from kb.models import Experience, Hardware
from kb.queries import load_or_skip
from retrieval.insights import insights
from retrieval.schemas import BootstrapPlan, HardwareMatch, PlanItem

WEIGHTS = {"arch": 0.4, "sm_count": 0.15, "mem_bandwidth_gbps": 0.3, "smem_per_sm_kib": 0.15}
_ARCH = re.compile(r"sm_?(\d+)")


def arch_similarity(a: str | None, b: str | None) -> float:
    if not a or not b:
        return 0.5
    if a == b:
        return 1.0
    ma, mb = _ARCH.search(a), _ARCH.search(b)
    if ma and mb and ma.group(1)[:-1] == mb.group(1)[:-1]:
        return 0.6
    return 0.1


def _ratio(a: float | None, b: float | None) -> float:
    if a is None or b is None or a <= 0 or b <= 0:
        return 0.5
    return min(a, b) / max(a, b)


def similarity(target: dict[str, Any], hw: Hardware) -> float:
    value = WEIGHTS["arch"] * arch_similarity(target.get("arch"), hw.arch)
    for name in ("sm_count", "mem_bandwidth_gbps", "smem_per_sm_kib"):
        value += WEIGHTS[name] * _ratio(target.get(name), getattr(hw, name))
    return round(value, 4)


def similar_hardware(session: Session, target: dict[str, Any], top: int = 3,
                     include_own: bool = False) -> list[HardwareMatch]:
    counts = dict(session.exec(
        select(Experience.hardware_id, func.count()).group_by(Experience.hardware_id)).all())
    matches = [
        HardwareMatch(hardware_id=hw.id, gpu_name=hw.gpu_name, arch=hw.arch,
                      similarity=similarity(target, hw), experiences=int(counts.get(hw.id, 0)))
        for hw in session.exec(select(Hardware)).all()
        if counts.get(hw.id) and (include_own or hw.gpu_name != target.get("gpu_name"))
    ]
    matches.sort(key=lambda m: (-m.similarity, -m.experiences, m.hardware_id))
    return matches[:top]


def bootstrap(
    session: Session, target: dict[str, Any], op_type: str | None = None, limit: int = 10,
    include_own: bool = False,
) -> BootstrapPlan:
    """What to try first on ``target`` (keys: gpu_name, arch, sm_count, ...); with
    ``include_own`` the target GPU's own experiences count too (a second optimization on
    a card already known), otherwise only other hardware (a card never seen)."""
    matches = similar_hardware(session, target, include_own=include_own)
    items: list[PlanItem] = []
    for match in matches:
        report = insights(session, op_type=op_type, gpu_name=match.gpu_name, arch=match.arch)
        for cat in report.categories:
            if not cat.wins:
                continue
            gain = cat.median_speedup or 1.0
            items.append(PlanItem(
                kind="edit", category=cat.category, from_hardware=match.hardware_id,
                evidence=(f"won {cat.wins}/{cat.count} on {match.gpu_name}, median "
                          f"{gain:.2f}x, best {(cat.best_speedup or gain):.2f}x vs parent"),
                example_ids=cat.example_ids, score=round(match.similarity * cat.win_rate * gain, 4),
            ))
        items.extend(_best_configs(session, match, op_type))
    items.sort(key=lambda i: -i.score)
    return BootstrapPlan(target=target, similar_hardware=matches, items=items[:limit])


def _best_configs(session: Session, match: HardwareMatch, op_type: str | None) -> list[PlanItem]:
    """The best measured configuration per task on that hardware."""
    stmt = select(Experience).where(
        Experience.hardware_id == match.hardware_id, Experience.verdict == "improved",
        Experience.evidence == "measured", Experience.speedup_vs_baseline.is_not(None))
    if op_type:
        stmt = stmt.where(Experience.op_type == op_type)
    best: dict[tuple[str, str], Experience] = {}
    for row in session.exec(stmt).all():
        key = (row.task_id, row.dtype)
        if key not in best or (row.speedup_vs_baseline or 0) > (best[key].speedup_vs_baseline or 0):
            best[key] = row
    items = []
    for (task_id, dtype), row in best.items():
        record = load_or_skip(row)
        if record is None:  # unreadable row: skipped (kernelkb doctor lists it)
            continue
        gain = row.speedup_vs_baseline or 1.0
        items.append(PlanItem(
            kind="config", category=record.edit.categories[0], config=dict(record.edit.config),
            from_hardware=match.hardware_id,
            evidence=f"best measured {task_id} {dtype} config on {match.gpu_name}: {gain:.2f}x "
                     "vs baseline",
            example_ids=[row.id], score=round(match.similarity * gain, 4),
            task_id=task_id, dtype=dtype, similarity=match.similarity,
        ))
    return items
