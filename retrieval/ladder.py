"""The fallback ladder: which rows may answer a query, best tier first.

Rungs, in order: same GPU and Triton version -> same GPU -> same architecture -> any
hardware, for the query's op; then the same tiers for related ops (the query carries them:
the task's declared ``Task.related_ops``, filled in by the caller that knows the task). A
rung is a filter on the in-memory columns (retrieval/columns.py: vectorised, ~1 ms at 100k
rows where the SQL took ~9 ms), and the ladder stops descending once it has enough
candidates, so a well-covered GPU never pays for the lower rungs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from kernelkb.retrieval.columns import Snapshot
from kernelkb.retrieval.query import RetrievalQuery

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
    op_types: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"related_{self.name}" if self.related else self.name

    @cached_property
    def weight(self) -> float:
        return RUNG_WEIGHT[self.name] * (RELATED_FACTOR if self.related else 1.0)

    @property
    def same_hardware(self) -> bool:
        return self.name != "any_hardware"


@dataclass(frozen=True)
class Candidates:
    """The ladder's answer: row numbers into the snapshot and the rung of each row."""

    snap: Snapshot
    rows: np.ndarray  # int64, rung order then rowid order
    rung: np.ndarray  # index into ``rungs`` per row
    rungs: list[Rung]

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> np.ndarray:
        source = self.snap.coded.get(name)
        return (source if source is not None else self.snap.floats[name])[self.rows]

    def ids(self, positions: np.ndarray | list[int]) -> list[str]:
        return self.snap.ids[self.rows[positions]].tolist()

    @cached_property
    def is_loss(self) -> np.ndarray:
        return np.isin(self.column("verdict"), _codes(self.snap, "verdict", LOSS_VERDICTS))


def rungs(query: RetrievalQuery) -> list[Rung]:
    hardware: list[str] = []
    if query.gpu_name and query.triton_version:
        hardware.append("same_gpu_triton")
    if query.gpu_name:
        hardware.append("same_gpu")
    if query.arch:
        hardware.append("same_arch")
    hardware.append("any_hardware")
    ops: list[tuple[bool, tuple[str, ...]]] = [(False, (query.op_type,))]
    if query.relatives():
        ops.append((True, query.relatives()))
    return [Rung(name, related, op_types) for related, op_types in ops for name in hardware]


def gather(snap: Snapshot, query: RetrievalQuery, enough: int) -> tuple[Candidates, list[str]]:
    """Candidates from the rungs, descending until ``enough`` non-losses are found.

    A row belongs to the first (best) rung that matches it; excluded tasks never match; with
    a regime, the op's own rows measured only in other regimes are left out (rows of
    unknown regime stay; related ops' rows, whose regimes are their own, are not
    filtered)."""
    ladder = rungs(query)
    loss_codes = _codes(snap, "verdict", LOSS_VERDICTS)
    excluded = _codes(snap, "task_id", query.exclude_tasks)
    parts: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    used: list[str] = []
    wins = 0
    pools: dict[tuple[str, ...], np.ndarray] = {}
    for n, rung in enumerate(ladder):
        pool = pools.get(rung.op_types)
        if pool is None:  # rows of these ops not yet taken by a better rung
            pool = snap.rows_of_ops(rung.op_types)
            if len(excluded):
                pool = pool[~np.isin(snap.coded["task_id"][pool], excluded)]
        hit = _hardware_mask(snap, pool, rung.name, query)
        if query.regime and not rung.related:  # related ops have regimes of their own
            hit &= np.isin(snap.coded["regime"][pool],
                           snap.vocab["regime"].codes_with_part(query.regime))
        fresh = pool[hit]
        pools[rung.op_types] = pool[~hit]
        if len(fresh):
            used.append(rung.label)
            parts.append(fresh)
            labels.append(np.full(len(fresh), n, dtype=np.int32))
            wins += int(np.count_nonzero(~np.isin(snap.coded["verdict"][fresh], loss_codes)))
        if wins >= enough:
            break
    rows = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    rung_of = np.concatenate(labels) if labels else np.zeros(0, dtype=np.int32)
    return Candidates(snap, rows, rung_of, ladder), used


def _hardware_mask(snap: Snapshot, pool: np.ndarray, name: str, q: RetrievalQuery) -> np.ndarray:
    def eq(column: str, value: str | None) -> np.ndarray:
        return snap.coded[column][pool] == snap.vocab[column].code(value)

    if name == "same_gpu_triton":
        return eq("gpu_name", q.gpu_name) & eq("triton_version", q.triton_version)
    if name == "same_gpu":
        return eq("gpu_name", q.gpu_name)
    if name == "same_arch":
        return eq("arch", q.arch)
    return np.ones(len(pool), dtype=bool)


def _codes(snap: Snapshot, column: str, values: tuple[str, ...] | list[str]) -> np.ndarray:
    codes = [snap.vocab[column].code(v) for v in values]
    return np.array([c for c in codes if c >= 0], dtype=np.int32)
