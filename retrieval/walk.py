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

For a task no GPU measured (no source GP), the ensemble of the order and the target's GP
followed the order's near-twin first proposals: there the walk is a GP over the target
with the ranker's order as its prior mean (transfer_bo.PriorMeanGP), a mixture of them
over a grid of prior weights and kernel lengths (transfer_bo.PriorMeanMixture, MIXTURE);
``choose_unseen_walk``, which chose one variant per target on the training tasks, is
the rule before it, kept for the benchmark's before/after.

``next_key`` and ``observe`` are all a caller needs: the benchmark measures from a table,
``kernelkb bootstrap`` replays the store's measurements of the target (``order_after``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernelkb.kernels.shared.stats import geomean
from kernelkb.retrieval.ranker import CostModel, ExperienceRow, config_key, group_tables
from kernelkb.retrieval.transfer_bo import (
    RGPE,
    Encoder,
    OrderPrior,
    PriorMeanGP,
    PriorMeanMixture,
    SourceGP,
    fit_gp,
)

# a task no GPU measured: the prior-mean walk's grid of (prior weight, kernel length),
# mixed (MIXTURE, transfer_bo.PriorMeanMixture). The lengths are one doubling up from the
# grid choose_unseen_walk chose from (CHOSEN_LENGTHS): on the inner folds (each held-out
# task's training tasks held out in turn, 6 x 5 model seeds, training tasks only) length
# 0.5 scored worst of the three for every held-out task, and 4 scored as 2 did.
PRIOR_WEIGHTS = (0.25, 0.5, 1.0, 2.0)
LENGTHS = (1.0, 2.0, 4.0)
MIXTURE = tuple((w, length) for w in PRIOR_WEIGHTS for length in LENGTHS)
# the rule before the mixture: one variant chosen per target (choose_unseen_walk); a
# variant is (prior weight, kernel length) or None (the ensemble)
CHOSEN_LENGTHS = (0.5, 1.0, 2.0)
TOLERANCE = 1.03  # the inner folds' score: evaluations until within 3% of the best
TIES = True  # the prior-mean walk: equal predictions share one prior (tied_positions)


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
                 keep_lead: bool = True, prior: tuple[float, float] | None = None,
                 mixture: Sequence[tuple[float, float]] | None = None):
        """``prior``: (prior weight, kernel length) of the prior-mean walk
        (transfer_bo.PriorMeanGP) in place of the ensemble, for a task no GPU measured
        (``choose_unseen_walk`` chooses it); ``mixture``: such pairs, the prior-mean
        walks mixed (transfer_bo.PriorMeanMixture; MIXTURE for a task no GPU measured).
        With either, the GPs ``gps`` are not used."""
        self.by_key: dict[str, list[ExperienceRow]] = defaultdict(list)
        for row in candidates:
            self.by_key[row.key].append(row)
        model.update([])
        ranked = model.rank(list(candidates), evidence_for=0)
        self.keys = [config_key(r.config) for r in ranked]
        self.index = {k: i for i, k in enumerate(self.keys)}
        x = encode([self.by_key[k][0].config for k in self.keys])
        positions = np.arange(len(self.keys), dtype=float)
        if (prior is not None or mixture) and TIES:
            positions = tied_positions([r.score for r in ranked])
        ranker = OrderPrior.of("learned ranker", positions)
        self.walked: list[int] = []
        self.rgpe: RGPE | PriorMeanGP | PriorMeanMixture
        if mixture:
            self.names = [ranker.name, "target"]
            self.rgpe = PriorMeanMixture(ranker, x, mixture)
            return
        if prior is not None:
            self.names = [ranker.name, "target"]
            self.rgpe = PriorMeanGP(ranker, x, *prior)
            return
        models: list[SourceGP | OrderPrior] = [ranker]
        models += [SourceGP.over(gpu, gp, x) for gpu, gp in sorted(gps.items())]
        self.names = [m.name for m in models] + ["target"]
        self.rgpe = RGPE(models, x, seed, lead=0, keep_lead=keep_lead or len(models) == 1)

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


def tied_positions(scores: Sequence[float]) -> np.ndarray:
    """Positions in an order (best first) with each run of equal scores at its mean
    position: configurations the model cannot tell apart (knobs its features do not see,
    such as a task's own switches, change no launch feature) get one prior, so the walk
    chooses between them by what it has measured, not by their names' order."""
    out = np.arange(len(scores), dtype=float)
    start = 0
    for i in range(1, len(scores) + 1):
        if i == len(scores) or round(scores[i], 9) != round(scores[start], 9):
            out[start:i] = (start + i - 1) / 2
            start = i
    return out


def variant_name(prior: tuple[float, float] | None) -> str:
    return "ensemble" if prior is None else f"prior {prior[0]:g}, length {prior[1]:g}"


@dataclass(frozen=True)
class WalkChoice:
    """The walk for a task no GPU measured, as ``choose_unseen_walk`` chose it: ``prior``
    for ``Walk`` (None: the ensemble), each variant's score (mean log E@3% over the
    inner folds, lower is better) and the folds (the training tasks held out in turn)."""

    prior: tuple[float, float] | None
    scores: dict[str, float] = field(default_factory=dict)
    folds: tuple[str, ...] = ()
    name_as: str | None = None  # a walk no choice made (the benchmark's "mixture")

    @property
    def name(self) -> str:
        return self.name_as or variant_name(self.prior)


def unmeasured(rows: Sequence[ExperienceRow]) -> list[ExperienceRow]:
    """``rows`` as candidates: the same configurations and shapes, no time."""
    return [ExperienceRow(op=r.op, shape=r.shape, gpu=r.gpu, config=r.config, time_ms=None,
                          launch=r.launch, gpu_facts=r.gpu_facts, bytes_moved=r.bytes_moved,
                          flops=r.flops) for r in rows]


def walk_e3(walk: Walk, rows: Sequence[ExperienceRow], limit: int = 200) -> int:
    """Evaluations ``walk`` takes over the measured ``rows`` (one op on one GPU) until a
    configuration within 3% of their best (geomean over the shapes; a configuration
    missing a shape failed); past ``limit`` proposals, its remaining order counts."""
    by_key: dict[str, list[ExperienceRow]] = defaultdict(list)
    for r in rows:
        by_key[r.key].append(r)
    shapes = {r.shape for r in rows}
    truth = {}
    for key, members in by_key.items():
        times = [r.time_ms for r in members if r.time_ms and not r.failed]
        truth[key] = geomean(times) if len(times) == len(shapes) else None
    best = min(t for t in truth.values() if t is not None) * TOLERANCE
    for step in range(1, min(limit, len(truth)) + 1):
        pick = walk.next_key()
        if pick is None:
            break
        walk.observe(pick, by_key[pick])
        if (truth.get(pick) or math.inf) <= best:
            return step
    order = walk.remaining()
    return next(i for i, k in enumerate(order, 1) if (truth.get(k) or math.inf) <= best)


def choose_unseen_walk(model: CostModel, train: Sequence[ExperienceRow], gpu: str,
                       seed: int = 0, limit: int = 200,
                       lengths: Sequence[float] = CHOSEN_LENGTHS) -> WalkChoice:
    """The walk for a task ``model`` never trained on and no GPU measured, chosen on the
    training rows alone (the rule before MIXTURE, kept for the benchmark's before/after):
    each task measured on ``gpu`` (else on the training GPU with the most tasks) is held
    out in turn, the model refit without it (``CostModel.refit``, same settings and
    seed), and every variant walks it (the ensemble, and the prior-mean walk at each of
    PRIOR_WEIGHTS x ``lengths``); the variant with the lowest mean log E@3% over those
    tasks is chosen, ties to the ensemble (the walk for a task other GPUs measured).
    Fewer than two such tasks: the ensemble, unchosen."""
    ops_on: dict[str, set[str]] = defaultdict(set)
    for r in train:
        if r.time_ms and not r.failed:  # a task with no timed configuration scores nothing
            ops_on[r.gpu].add(r.op)
    if len(ops_on.get(gpu, ())) < 2 and ops_on:
        gpu = max(sorted(ops_on), key=lambda g: len(ops_on[g]))
    folds = tuple(sorted(ops_on.get(gpu, ())))
    if len(folds) < 2:
        return WalkChoice(None)
    variants: list[tuple[float, float] | None] = [None]
    variants += [(w, length) for w in PRIOR_WEIGHTS for length in lengths]
    logs: dict[str, list[float]] = defaultdict(list)
    for op in folds:
        inner = model.refit([r for r in train if r.op != op])
        rows = [r for r in train if r.op == op and r.gpu == gpu]
        candidates = unmeasured(rows)
        encode = Encoder([r.config for r in rows])
        for prior in variants:
            walk = Walk(inner, candidates, {}, encode, seed, prior=prior)
            logs[variant_name(prior)].append(math.log(walk_e3(walk, rows, limit)))
    scores = {name: float(np.mean(v)) for name, v in logs.items()}
    chosen = min(variants, key=lambda p: (round(scores[variant_name(p)], 9), p is not None))
    return WalkChoice(chosen, scores, folds)


def replay(model: CostModel, candidates: Sequence[ExperienceRow],
           train: Sequence[ExperienceRow], measured: Sequence[ExperienceRow],
           seed: int = 0) -> list[str]:
    """What the walk proposes next after the target's ``measured`` rows (in the order
    given): the candidates' configuration keys not measured yet, in the walk's order.
    ``train``: the other GPUs' rows the model was fit on (their GPs are fit here). For a
    task no GPU in ``train`` measured, the walk is the prior-mean mixture (MIXTURE)."""
    if not candidates:
        return []
    op = candidates[0].op
    encode = Encoder([r.config for r in candidates] + [r.config for r in train if r.op == op])
    gps = fit_sources(train, op, encode, seed)
    unseen = not gps and op not in model.train_ops
    walk = Walk(model, candidates, gps, encode, seed, mixture=MIXTURE if unseen else None)
    rows: dict[str, list[ExperienceRow]] = defaultdict(list)
    for r in measured:
        if r.key in walk.index:
            rows[r.key].append(r)
    for key, members in rows.items():
        walk.observe(key, members)
    return walk.remaining()[len(rows):]
