"""The fallback ladder: which rows may answer a query, best tier first.

Rungs, in order: same GPU and Triton version -> same GPU -> same architecture -> any
hardware, for the query's op; then the same tiers for related ops. Candidates are read
from indexed SQL columns (a few ms at 100k) and the ladder stops descending once it has
enough candidates, so a well-covered GPU never pays for the lower rungs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from sqlalchemy import and_, not_, or_
from sqlmodel import Session, select

from kb.models import Experience
from retrieval.query import RetrievalQuery
from retrieval.related import related_ops

# How much a rung's evidence counts, relative to the exact match.
RUNG_WEIGHT = {
    "same_gpu_triton": 1.0,
    "same_gpu": 0.92,
    "same_arch": 0.85,
    "any_hardware": 0.7,
}
RELATED_FACTOR = 0.75
LOSS_VERDICTS = ("regressed", "incorrect", "failed", "invalid")


@dataclass(frozen=True)
class Rung:
    name: str
    related: bool
    condition: Any

    @property
    def label(self) -> str:
        return f"related_{self.name}" if self.related else self.name

    @cached_property
    def weight(self) -> float:  # cached: read once per candidate per query
        return RUNG_WEIGHT[self.name] * (RELATED_FACTOR if self.related else 1.0)

    @property
    def same_hardware(self) -> bool:
        return self.name != "any_hardware"


@dataclass
class Candidate:
    id: str
    rung: Rung
    op_type: str
    task_id: str
    dtype: str
    verdict: str
    evidence: str
    categories: str
    speedup_vs_parent: float | None
    speedup_vs_baseline: float | None
    is_loss: bool = field(init=False)

    def __post_init__(self) -> None:
        self.is_loss = self.verdict in LOSS_VERDICTS


def rungs(query: RetrievalQuery) -> list[Rung]:
    hardware: list[tuple[str, Any]] = []
    if query.gpu_name and query.triton_version:
        same = and_(Experience.gpu_name == query.gpu_name,
                    Experience.triton_version == query.triton_version)
        hardware.append(("same_gpu_triton", same))
    if query.gpu_name:
        hardware.append(("same_gpu", Experience.gpu_name == query.gpu_name))
    if query.arch:
        hardware.append(("same_arch", Experience.arch == query.arch))
    hardware.append(("any_hardware", True))
    ops: list[tuple[bool, tuple[str, ...]]] = [(False, (query.op_type,))]
    if query.include_related and related_ops(query.op_type):
        ops.append((True, related_ops(query.op_type)))
    out = []
    for related, op_types in ops:
        for name, hw in hardware:
            out.append(Rung(name, related, and_(Experience.op_type.in_(op_types), hw)))
    return out


def gather(
    session: Session, query: RetrievalQuery, enough: int
) -> tuple[list[Candidate], list[str]]:
    """Candidates from the rungs, descending until ``enough`` are found.

    A row belongs to the first (best) rung that matches it."""
    seen: set[str] = set()
    found: list[Candidate] = []
    used: list[str] = []
    covered: list[Any] = []
    columns = (Experience.id, Experience.op_type, Experience.task_id, Experience.dtype,
               Experience.verdict, Experience.evidence, Experience.categories,
               Experience.speedup_vs_parent, Experience.speedup_vs_baseline)
    for rung in rungs(query):
        stmt = select(*columns).where(rung.condition)
        if query.exclude_tasks:
            stmt = stmt.where(Experience.task_id.not_in(query.exclude_tasks))
        if covered:
            stmt = stmt.where(not_(or_(*covered)))
        rows = session.exec(stmt).all()
        covered.append(rung.condition)
        fresh = [Candidate(r[0], rung, *r[1:]) for r in rows if r[0] not in seen]
        if fresh:
            used.append(rung.label)
        seen.update(c.id for c in fresh)
        found.extend(fresh)
        if sum(not c.is_loss for c in found) >= enough:
            break
    return found, used
