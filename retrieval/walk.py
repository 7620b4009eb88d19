"""The bootstrap walk on a new card: after each measurement there, the order updates.

Why a walk and not a list: the first measurements on the target say more about it than
any other GPU does. The walk is transfer Bayesian optimisation (RGPE,
retrieval/transfer_bo.py) whose ensemble holds the learned ranker's zero-shot order
(retrieval/ranker.py) beside one Gaussian process per measured GPU and one over the
target's own measurements. Until two measurements can be ranked, the ranker's order
leads (its first proposals are validated on the training GPUs); from then on, each
model counts by how well it orders what the target measured, so a ranker that was
wrong about this card gives way to the GPUs that order like it, and to the target's own
GP.

``next_key`` and ``observe`` are all a caller needs: the benchmark measures from a table,
``kernelkb bootstrap`` replays the store's measurements of the target (``order_after``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kernelkb.kernels.shared.stats import geomean
from kernelkb.retrieval.ranker import CostModel, ExperienceRow, config_key, group_tables
from kernelkb.retrieval.transfer_bo import RGPE, Encoder, OrderPrior, SourceGP, fit_gp


def source_targets(rows: Sequence[ExperienceRow], op: str
                   ) -> dict[str, tuple[list[dict[str, Any]], np.ndarray]]:
    """GPU -> (configurations, their mean log relative time over the shapes) of ``op``;
    a failure counts as twice the slowest (ranker.relative_labels)."""
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    configs: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r.op == op:
            configs.setdefault(r.key, r.config)
    for _, tables in group_tables([r for r in rows if r.op == op]).items():
        for gpu, table in tables.items():
            for key, (label, _) in table.entries.items():
                per[gpu][key].append(label)
    return {gpu: ([configs[k] for k in sorted(v)], np.array([np.mean(v[k]) for k in sorted(v)]))
            for gpu, v in per.items()}


def fit_sources(rows: Sequence[ExperienceRow], op: str, encode: Encoder, seed: int = 0
                ) -> dict[str, Any]:
    """GPU -> its fitted GP over ``op``'s knobs (transfer_bo.fit_gp)."""
    return {gpu: fit_gp(encode(configs), y, seed)
            for gpu, (configs, y) in sorted(source_targets(rows, op).items())}


class Walk:
    """One walk over ``candidates`` (every configuration on every shape, no time): the
    ranker's zero-shot order (``model`` fitted on the other GPUs) and the GPs ``gps``
    (GPU -> fitted GP over ``encode``'s knob values) in one RGPE ensemble."""

    def __init__(self, model: CostModel, candidates: Sequence[ExperienceRow],
                 gps: Mapping[str, Any], encode: Encoder, seed: int = 0,
                 keep_lead: bool = True):
        self.by_key: dict[str, list[ExperienceRow]] = defaultdict(list)
        for row in candidates:
            self.by_key[row.key].append(row)
        model.update([])
        self.keys = [config_key(r.config) for r in model.rank(list(candidates),
                                                                evidence_for=0)]
        self.index = {k: i for i, k in enumerate(self.keys)}
        x = encode([self.by_key[k][0].config for k in self.keys])
        models: list[SourceGP | OrderPrior] = [
            OrderPrior.of("learned ranker", np.arange(len(self.keys), dtype=float))]
        models += [SourceGP.over(gpu, gp, x) for gpu, gp in sorted(gps.items())]
        self.names = [m.name for m in models] + ["target"]
        self.rgpe = RGPE(models, x, seed, lead=0, keep_lead=keep_lead or len(models) == 1)
        self.walked: list[int] = []

    def next_key(self) -> str | None:
        """The configuration to measure next (None: all measured)."""
        if len(self.walked) == len(self.keys):
            return None
        return self.keys[self.rgpe.next(set(self.walked))]

    def observe(self, key: str, rows: Sequence[ExperienceRow]) -> None:
        """``key`` was measured: its rows on the target (time_ms None = failed); its time
        is the geomean over the candidates' shapes, failed if any shape is missing."""
        i = self.index[key]
        self.walked.append(i)
        shapes = {r.shape for r in self.by_key[key]}
        times = {r.shape: r.time_ms for r in rows if r.time_ms and not r.failed}
        ok = shapes <= set(times)
        self.rgpe.observe(i, math.log(geomean([times[s] for s in shapes])) if ok else None)

    def weights(self) -> dict[str, float]:
        """Each model's current weight in the ensemble."""
        return {n: float(w) for n, w in zip(self.names, self.rgpe.weights, strict=True)}

    def remaining(self) -> list[str]:
        """The walk so far, then what is left in the ensemble's current order."""
        rest = self.rgpe.ranking(set(self.walked)) if len(self.walked) < len(self.keys) \
            else []
        return [self.keys[i] for i in self.walked + rest]


def replay(model: CostModel, candidates: Sequence[ExperienceRow],
           train: Sequence[ExperienceRow], measured: Sequence[ExperienceRow],
           seed: int = 0) -> list[str]:
    """What the walk proposes next after the target's ``measured`` rows (in the order
    given): the candidates' configuration keys not measured yet, in the walk's order.
    ``train``: the other GPUs' rows the model was fit on (their GPs are fit here)."""
    if not candidates:
        return []
    op = candidates[0].op
    encode = Encoder([r.config for r in candidates] + [r.config for r in train if r.op == op])
    walk = Walk(model, candidates, fit_sources(train, op, encode, seed), encode, seed)
    rows: dict[str, list[ExperienceRow]] = defaultdict(list)
    for r in measured:
        if r.key in walk.index:
            rows[r.key].append(r)
    for key, members in rows.items():
        walk.observe(key, members)
    return walk.remaining()[len(rows):]
