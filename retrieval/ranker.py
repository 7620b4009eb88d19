"""A learned cost model that orders candidate configurations for (task, GPU, shape).

Public API (what bootstrap, the offline agent and the benchmarks code against)::

    from kernelkb.retrieval.ranker import CostModel, RankedConfig, candidate_rows, rows_from_records

    rows = rows_from_records(records, launch_of)      # ExperienceRecords -> ExperienceRow
    model = CostModel().fit(rows)                      # measured rows, many ops and GPUs
    cands = candidate_rows("softmax", configs, shapes, target_facts, launch_of_config)
    ranked = model.rank(cands)                         # list[RankedConfig], best first
    ranked[0].config, ranked[0].predicted_rel_time     # e.g. {...}, 1.07 (x the best)
    ranked[0].evidence                                 # list[Neighbour]: the same config on
                                                       # other GPUs, rel time and rank there
    model.interval("softmax", ranked[0].predicted_rel_time, 1)  # (low, high): its 80%
                                                       # interval, or None
    model.update(measured_rows)                        # the target's own measurements
    ranked = model.rank(cands)                         # re-ordered with them

- ``launch_of(record, shape_label) -> Launch | None`` and ``cost_of(record, shape_label)
  -> (bytes, flops)`` are injected by the caller (retrieval may not import kernels): for
  Triton tasks ``kernels.records.record_launch`` / ``record_cost``; for imported Kernel Tuner
  data ``retrieval.launch.record_launch`` (no cost). ``facts_of(env)`` defaults to
  ``default_facts``: kernels.shared.gpus' table under the record's own fingerprint.
- ``candidate_rows(op, configs, shape_labels, target_facts, launch_of_config,
  cost_of_shape)``: for a Triton task ``lambda c, s: task.launch(c, task.parse_shape(s))``
  and ``lambda s: (task.bytes_moved(task.parse_shape(s), dtype), task.flops(...))``;
  ``target_facts`` as ``default_facts(env)`` gives them (gpu_name, arch, sm_count, ...).
- ``ExperienceRow``: op, shape label, GPU name, config, measured time (None = failed), the
  launch facts, the GPU facts and the shape's bytes / flops.
- ``RankedConfig(config, predicted_rel_time, score, evidence, measured_rel_time)``:
  ``predicted_rel_time`` estimates time / best time on the target (geomean over the
  shapes; NaN under the lambdarank objective, which predicts an order, not a time);
  ``evidence`` (first 20 only) lists ``Neighbour(gpu, similarity, rel_time, rank_pct,
  shape)``: the same configuration on the most similar training GPUs.
- ``interval(op, predicted_rel_time, rank)``: the 80% interval of a zero-shot prediction
  at that rank (1 = first), calibrated on the training GPUs each held out of a refit
  (``calibration``: computed on first use, kept with the model; see ``Calibration``);
  None where too few residuals exist (one training GPU, lambdarank), and
  ``calibration.note`` says why.
- ``update(rows)`` takes ALL the target's measurements so far on each call (``[]`` goes
  back to the zero-shot model); cheap (no retraining of the base model).
- ``orders_for(op)``: zero-shot, ``rank`` takes configurations in turn from the model's
  order and the simple baselines' (most similar GPU, mean normalised rank), best first by
  their regret on training GPUs held out of a refit (``order_scores``); the first of all
  is then the consensus's (the training GPUs' time / best weighted by similarity,
  ``_consensus_scores``), the second the geometric consensus's (the same weights over
  its log; ``_leads``); after an accepted update, the model's order alone.
- ``rank`` puts configurations that cannot launch (``cannot_launch``: shared memory per
  program over the GPU's per SM) last in every order.
- ``CostModel(objective="regression" | "regression_top" | "lambdarank" | "auto")``.

What it learns. Target: log(time / best time) of each row within its (op, shape, GPU)
group, clipped at 20x; a failed configuration counts as twice the group's slowest. Inputs:
the transferable features of retrieval/features.py, the raw configuration namespaced by
op, and *stacking* features: what the same configuration did on the other GPUs of the
training set (its normalised rank and relative time there, averaged with weights from
retrieval.hardware.gpu_similarity; the rank on the most similar GPU; min, max, count).
For a training row these are computed without its own GPU (leave-own-GPU-out), so the
model never learns from a feature that contains its own label.

A configuration of an op the model never trained on has no raw features of its own; for
such candidates the model is one trained on the launch, shape, GPU and stacking features
only (fit on first use), so trees split on what the new op has rather than routing it
down the missing-value branch of another op's knobs.

Objectives: ``regression`` (L2 on the log relative time), ``regression_top`` (the same,
rows near their group's best weighted up to 10x: the head of the order is what a search
walks) and ``lambdarank`` (LightGBM's ranking objective over the same groups, graded by
distance to the best). ``objective="auto"`` picks one on inner folds of the *training*
rows only (leave-one-GPU-out over 2 training GPUs, or leave-one-op-out when there is a
single GPU), by the mean best-of-top-10; benchmarks/transfer_gpus.py reports the
choice and the fold scores per case.

Why LightGBM: gradient-boosted trees are what TVM / Ansor's cost model uses (XGBoost) and
fit this data: mixed-scale numeric features, missing values (a Triton row has no
``convolution.block_size_x``; a GPU table may lack L2), strongly non-linear thresholds
(a tile fits in shared memory or not). LightGBM over XGBoost: native NaN routing and
LambdaRank with query groups in one well-kept package, histogram training that is fast
on 2 CPU cores (the benchmark must run in minutes), and it was already a dependency.
Over scikit-learn: HistGradientBoosting has no ranking objective and no init_score for
the cheap update below.

update(measurements): the target GPU's own measurements, as they arrive. No retraining
of the base model; from ``min_update`` (4) measurements on: (1) each training GPU's
stacking weight becomes its facts similarity times how well its relative times agree
with the target's measured ones (Spearman over the shared configurations, floored at
0.05), so a GPU that orders like the target counts more; (2) a small booster is fit on
the target's rows with the base prediction subtracted (a residual model), its correction
shrunk by k / (k + 8) for k measurements. The update is kept only if, cross-validated over
the measured configurations (4 folds), it orders held-out measurements better than the
zero-shot model; else the zero-shot order stands. Measurements come from the head of the
model's own order, a biased sample: an update fit on them alone once reordered a whole
space badly (dedispersion on the W6600: 38 evaluations zero-shot, 3713 with ungated
updates), which is why it must earn its place. The bootstrap walk (retrieval/walk.py)
learns from the target's measurements otherwise: the zero-shot order is one member of a
transfer-BO ensemble whose weights follow those measurements.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from kernelkb.kernels.shared.launch import Launch
from kernelkb.kernels.shared.stats import geomean
from kernelkb.retrieval.features import default_facts, derive_features, raw_features
from kernelkb.retrieval.hardware import STACK_POWER, gpu_similarity

MAX_LOG_REL = math.log(20.0)  # clip: past 20x slower, how much slower no longer matters
FAIL_FACTOR = math.log(2.0)  # a failed configuration: twice the group's slowest


def config_key(config: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={config[k]}" for k in sorted(config))


@dataclass
class ExperienceRow:
    """One configuration on one shape and GPU; ``time_ms`` None = failed or unmeasured."""

    op: str
    shape: str
    gpu: str
    config: dict[str, Any]
    time_ms: float | None
    launch: Launch | None
    gpu_facts: dict[str, Any]
    bytes_moved: float | None = None
    flops: float | None = None
    failed: bool = False

    @cached_property
    def key(self) -> str:
        return config_key(self.config)

    @property
    def group(self) -> tuple[str, str, str]:
        return (self.op, self.shape, self.gpu)


@dataclass(frozen=True)
class Neighbour:
    """The same configuration on another GPU: evidence for a prediction."""

    gpu: str
    similarity: float
    rel_time: float | None  # time / that GPU's best on the shape (None = failed there)
    rank_pct: float  # 0 = its best configuration, 1 = its worst
    shape: str = ""


@dataclass(frozen=True)
class RankedConfig:
    config: dict[str, Any]
    predicted_rel_time: float
    score: float  # the model's mean predicted log relative time over the shapes
    evidence: list[Neighbour] = field(default_factory=list)
    measured_rel_time: float | None = None  # on the target, when update() has seen it


# -- rows -----------------------------------------------------------------------------
def rows_from_records(
    records: Iterable[Any],
    launch_of: Callable[[Any, str], Any],
    facts_of: Callable[[Any], dict[str, Any]] = default_facts,
    cost_of: Callable[[Any, str], tuple[float | None, float | None]] | None = None,
) -> list[ExperienceRow]:
    """Training rows from ExperienceRecords: one per timed shape of a measured record, one
    failure row (on its shape set) per failed record. Duplicates (same op, shape, GPU and
    config) keep the median time. ``launch_of(record, shape)`` and ``cost_of(record,
    shape) -> (bytes, flops)`` come from the caller (kernels for Triton tasks,
    retrieval.launch for Kernel Tuner data)."""
    times: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    first: dict[tuple[str, str, str, str], ExperienceRow] = {}
    facts_cache: dict[str, dict[str, Any]] = {}
    for record in records:
        gpu = record.env.gpu_name
        if gpu not in facts_cache:
            facts_cache[gpu] = facts_of(record.env)
        fb = record.feedback
        verdict = getattr(record.verdict, "value", record.verdict)
        if fb.timings and fb.timing_available and not fb.suspect:
            items = [(t.shape, t.median_ms) for t in fb.timings]
        elif verdict in ("failed", "incorrect"):
            items = [(record.task.shape_set, None)]
        else:
            continue
        for shape, time_ms in items:
            key = (record.task.op_type, shape, gpu, config_key(record.edit.config))
            if key not in first:
                launch = launch_of(record, shape)
                cost = cost_of(record, shape) if cost_of else (None, None)
                first[key] = ExperienceRow(
                    op=record.task.op_type, shape=shape, gpu=gpu,
                    config=dict(record.edit.config), time_ms=None,
                    launch=Launch.of(launch) if launch is not None else None,
                    gpu_facts=facts_cache[gpu], bytes_moved=cost[0], flops=cost[1],
                    failed=time_ms is None)
            if time_ms is not None:
                times[key].append(time_ms)
    rows = []
    for key, row in first.items():
        if times.get(key):
            row.time_ms = float(np.median(times[key]))
            row.failed = False
        rows.append(row)
    return rows


def candidate_rows(
    op: str, configs: Iterable[Mapping[str, Any]], shapes: Sequence[str],
    gpu_facts: Mapping[str, Any], launch_of_config: Callable[[Mapping[str, Any], str], Any],
    cost_of_shape: Callable[[str], tuple[float | None, float | None]] | None = None,
) -> list[ExperienceRow]:
    """Rows to rank on a target GPU: every config on every shape, no time."""
    gpu = str(gpu_facts.get("gpu_name") or "target")
    rows = []
    for config in configs:
        for shape in shapes:
            launch = launch_of_config(config, shape)
            cost = cost_of_shape(shape) if cost_of_shape else (None, None)
            rows.append(ExperienceRow(
                op=op, shape=shape, gpu=gpu, config=dict(config), time_ms=None,
                launch=Launch.of(launch) if launch is not None else None,
                gpu_facts=dict(gpu_facts), bytes_moved=cost[0], flops=cost[1]))
    return rows


# -- the measured reference: what each configuration did on each GPU ------------------
@dataclass
class GroupTable:
    """One (op, shape, GPU) group: config key -> (log rel time, normalised rank)."""

    gpu: str
    facts: dict[str, Any]
    entries: dict[str, tuple[float, float]]
    measured: dict[str, float]  # config key -> log rel time, timed configurations only


def group_tables(rows: Iterable[ExperienceRow]) -> dict[tuple[str, str], dict[str, GroupTable]]:
    """(op, shape) -> GPU -> GroupTable, with failures ranked last."""
    grouped: dict[tuple[str, str, str], list[ExperienceRow]] = defaultdict(list)
    for row in rows:
        grouped[row.group].append(row)
    out: dict[tuple[str, str], dict[str, GroupTable]] = defaultdict(dict)
    for (op, shape, gpu), members in grouped.items():
        labels = relative_labels(members)
        timed = {r.key: lab for r, lab in zip(members, labels, strict=True) if not r.failed
                 and r.time_ms}
        order = sorted(range(len(members)), key=lambda i: labels[i])
        n = max(1, len(members) - 1)
        entries = {}
        for position, i in enumerate(order):
            entries[members[i].key] = (labels[i], position / n)
        out[(op, shape)][gpu] = GroupTable(gpu, members[0].gpu_facts, entries, timed)
    return out


def relative_labels(members: Sequence[ExperienceRow]) -> list[float]:
    """log(time / best) per row of one group, clipped; failures beyond the slowest."""
    times = [r.time_ms for r in members if r.time_ms and not r.failed]
    if not times:
        return [MAX_LOG_REL + FAIL_FACTOR] * len(members)
    best = min(times)
    labels = [min(MAX_LOG_REL, math.log(r.time_ms / best)) if r.time_ms and not r.failed
              else None for r in members]
    worst = max(v for v in labels if v is not None)
    return [v if v is not None else min(MAX_LOG_REL, worst) + FAIL_FACTOR for v in labels]


STACK_FEATURES = ("stack.sim_rank", "stack.sim_rel", "stack.top_rank", "stack.top_rel",
                  "stack.top_similarity", "stack.mean_rank", "stack.min_rank",
                  "stack.max_rank", "stack.count")


def stack_features(key: str, gpu: str, facts: Mapping[str, Any],
                   others: Mapping[str, GroupTable],
                   weights: Mapping[str, float] | None = None,
                   similarity: Callable[[Mapping[str, Any], Mapping[str, Any]], float] =
                   gpu_similarity) -> dict[str, float]:
    """What configuration ``key`` did on the other GPUs of the same (op, shape), weighted
    by similarity to this GPU (``weights`` overrides it: update()'s agreement weights).
    ``gpu`` itself is always left out."""
    ranks, rels, ws = [], [], []
    top = (-1.0, math.nan, math.nan)
    for name, table in others.items():
        if name == gpu or key not in table.entries:
            continue
        rel, rank = table.entries[key]
        w = weights[name] if weights and name in weights else \
            similarity(facts, table.facts) ** STACK_POWER
        ranks.append(rank)
        rels.append(rel)
        ws.append(w)
        if w > top[0]:
            top = (w, rank, rel)
    if not ranks:
        return {name: math.nan for name in STACK_FEATURES} | {"stack.count": 0.0}
    total = sum(ws) or 1.0
    return {
        "stack.sim_rank": sum(w * r for w, r in zip(ws, ranks, strict=True)) / total,
        "stack.sim_rel": sum(w * r for w, r in zip(ws, rels, strict=True)) / total,
        "stack.top_rank": top[1],
        "stack.top_rel": top[2],
        "stack.top_similarity": top[0],
        "stack.mean_rank": sum(ranks) / len(ranks),
        "stack.min_rank": min(ranks),
        "stack.max_rank": max(ranks),
        "stack.count": float(len(ranks)),
    }


# -- the model --------------------------------------------------------------------------
def _grade(label: float) -> int:
    """LambdaRank relevance: 4 within 3% of the best, 3 within 10%, 2 within 30%, 1 within
    2x, 0 beyond."""
    for grade, bound in ((4, 1.03), (3, 1.10), (2, 1.30), (1, 2.0)):
        if label <= math.log(bound):
            return grade
    return 0


OBJECTIVES = ("regression", "regression_top", "lambdarank")
INNER_FOLDS = 2  # objective="auto": held-out training GPUs (or ops) it compares on
RESIDUAL_PRIOR = 8  # measurements at which the target's residual model counts half
TOP_WEIGHT = 9.0  # regression_top: a row at the best weighs 10x, at 1.1x ~4.3x, at 2x ~1x
INTERVAL_LEVEL = 0.8  # the predicted relative time's interval: its central 80%
CALIBRATION_FOLDS = 5  # training GPUs held out in turn (one refit each) for its residuals
HEAD_RANKS = 10  # a ranking's first 10 (what bootstrap shows) are calibrated apart
CALIBRATION_CONFIGS = 2000  # configurations per (op, held-out GPU) scored for residuals
MIN_RESIDUALS = 20  # per (op, stratum), from >= 2 held-out GPUs: fewer, no interval
WIDEN = tuple(round(1.0 + 0.1 * i, 1) for i in range(31))  # the factors tried, 1x-4x
# the simple baselines a zero-shot order can come from instead of the model, each a
# stacking feature: the most similar training GPU's relative time, the mean normalised rank
BASELINES = {"most_similar_gpu": "stack.top_rel", "mean_rank": "stack.mean_rank"}
ORDERS = ("model", *BASELINES)
# the first proposal's source: the similarity-weighted mean relative time over the
# training GPUs (the consensus of the sources, the most similar counting most), averaged
# as time / best, not its log (``consensus_value``); the second proposal's: the same
# weights over its log (the stacking feature; the first proposal's source before)
CONSENSUS = "consensus"
GEOMETRIC_CONSENSUS = "geometric_consensus"


def consensus_value(key: str, gpu: str, facts: Mapping[str, Any],
                    others: Mapping[str, GroupTable],
                    similarity: Callable[[Mapping[str, Any], Mapping[str, Any]], float] =
                    gpu_similarity) -> float:
    """The log of configuration ``key``'s expected time / best over the other GPUs of one
    (op, shape), each weighted by similarity to this GPU to the power STACK_POWER (as
    ``stack.sim_rel`` weights them); NaN where none measured it. Why the mean of time /
    best and not of its log (``stack.sim_rel``): a first proposal is one bet, and its
    cost is the time it takes over the best; the mean of the log forgives a
    configuration that is 2x slow on one GPU for being a few percent faster on the
    others, the mean of the ratio does not. Chosen on training GPUs alone
    (benchmarks/first_proposal_rules.py: each case's training GPUs held out in turn, 13
    of 30 within 10% against 12 on convolution, 21 against 21 on dedispersion). The
    safer pick is less often the best itself (within 3%: 5 of 30 against 8 on
    convolution), so the mean of the log proposes second (``CostModel._leads``)."""
    total, weight = 0.0, 0.0
    for name, table in others.items():
        if name == gpu or key not in table.entries:
            continue
        w = similarity(facts, table.facts) ** STACK_POWER
        total += w * math.exp(table.entries[key][0])
        weight += w
    return math.log(total / weight) if weight > 0 else math.nan


@dataclass(frozen=True)
class Calibration:
    """The interval's multiplicative bounds per op and stratum ("head": the first
    HEAD_RANKS of a ranking, "rest"): quantiles of log(measured / predicted relative time)
    on training GPUs each held out of a refit, so they measure how far the model misses
    on a GPU it never saw, not how well it fits its own rows. The head is apart because
    it was picked for its low predictions: there the model misses less, and upwards.

    A GPU's residuals miss together (one GPU is faster at everything big, another flat),
    so a band fit to a few GPUs' residuals covers a new GPU less often than its level
    says: it is widened about its median by the least factor of WIDEN at which each
    held-out GPU, left out of the band in turn, is covered ``level`` on average."""

    level: float
    bounds: dict[tuple[str, str], tuple[float, float]]  # (op, stratum) -> log-ratio bounds
    residuals: dict[tuple[str, str], int]  # (op, stratum) -> residuals they are taken over
    held_out: tuple[str, ...]  # the training GPUs held out
    note: str  # what the interval stands on, or why there is none
    widened: dict[tuple[str, str], float] = field(default_factory=dict)
    # (op, stratum) -> mean coverage of a held-out GPU by the band of the others, widened
    held_out_coverage: dict[tuple[str, str], float] = field(default_factory=dict)

    @property
    def method(self) -> str:
        return (f"split-conformal, leave-one-GPU-out: the {int(100 * self.level)}% band of "
                f"log(measured / predicted relative time) over {len(self.held_out)} "
                f"training GPU(s) each held out of a refit, the first {HEAD_RANKS} of a "
                "ranking apart from the rest, widened until it covers each of those GPUs "
                "left out of it")


class CostModel:
    """LightGBM over transferable + raw + stacking features; see the module docstring."""

    def __init__(self, objective: str = "regression", n_estimators: int = 150,
                 max_rows_per_group: int = 1500, seed: int = 0, min_update: int = 4,
                 threads: int = 1, objectives: Sequence[str] = OBJECTIVES):
        if objective not in (*OBJECTIVES, "auto"):
            raise ValueError(f"objective must be one of {OBJECTIVES} or auto: {objective!r}")
        self.objective = objective
        self.objectives = tuple(objectives)
        self.n_estimators = n_estimators
        self.max_rows_per_group = max_rows_per_group
        self.seed = seed
        self.min_update = min_update
        self.threads = threads
        # with_raw -> (booster, columns): the raw-feature model serves the training ops; a
        # new op gets a model of the features it has (trained on first use)
        self._models: dict[bool, tuple[Any, list[str]]] = {}
        self._sample_rows: list[tuple[ExperienceRow, float]] = []
        self.train_ops: set[str] = set()
        self.tables: dict[tuple[str, str], dict[str, GroupTable]] = {}
        self.train_gpus: set[str] = set()
        self.chosen_objective: str | None = None
        self.selection: dict[str, float] = {}
        self._measured: list[ExperienceRow] = []
        self._weights: dict[str, float] | None = None
        self._residual: tuple[Any, bool] | None = None
        self.update_accepted = False
        # (op, shape, GPU, config) -> (raw, launch) features, which never change
        self._static: dict[tuple[str, str, str, str],
                           tuple[dict[str, float], dict[str, float]]] = {}
        self._similarity: dict[tuple[str, str], float] = {}
        self._rows: list[ExperienceRow] = []
        self._calibration: Calibration | None = None
        self._refits: dict[str, CostModel] | None = None  # held-out GPU -> model without it
        self._order: dict[str, dict[str, float]] | None = None
        # configurations that cannot launch (cannot_launch) go last; False: the order
        # before that rule
        self.launch_limits = True

    def similarity(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
        """gpu_similarity, memoised by the two GPUs' names."""
        pair = (str(a.get("gpu_name")), str(b.get("gpu_name")))
        if pair not in self._similarity:
            self._similarity[pair] = gpu_similarity(a, b)
        return self._similarity[pair]

    # features --------------------------------------------------------------------------
    def _features(self, row: ExperienceRow, weights: Mapping[str, float] | None = None,
                  with_raw: bool = True) -> dict[str, float]:
        ident = (row.op, row.shape, row.gpu, row.key)
        static = self._static.get(ident)
        if static is None:
            derived = {}
            if row.launch is not None:
                derived = derive_features(row.launch, row.gpu_facts, row.bytes_moved, row.flops)
            static = (raw_features(row.op, row.config), derived)
            if len(self._static) > 200_000:
                self._static.clear()
            self._static[ident] = static
        stack = stack_features(row.key, row.gpu, row.gpu_facts,
                               self.tables.get((row.op, row.shape), {}), weights,
                               self.similarity)
        return {**static[0], **static[1], **stack} if with_raw else {**static[1], **stack}

    @staticmethod
    def _matrix(dicts: Sequence[Mapping[str, float]], columns: Sequence[str]) -> np.ndarray:
        out = np.full((len(dicts), len(columns)), np.nan, dtype=np.float64)
        index = {c: i for i, c in enumerate(columns)}
        for r, feats in enumerate(dicts):
            for name, value in feats.items():
                i = index.get(name)
                if i is not None:
                    out[r, i] = value
        return out

    # training --------------------------------------------------------------------------
    def _sample(self, rows: Sequence[ExperienceRow]) -> list[tuple[ExperienceRow, float]]:
        """Rows with labels, at most max_rows_per_group per group: all of the group's
        best tenth is kept, the rest drawn at random (seeded)."""
        rng = random.Random(self.seed)
        grouped: dict[tuple[str, str, str], list[ExperienceRow]] = defaultdict(list)
        for row in rows:
            grouped[row.group].append(row)
        out = []
        for group in sorted(grouped):
            members = grouped[group]
            labelled = sorted(zip(members, relative_labels(members), strict=True),
                              key=lambda p: p[1])
            if len(labelled) > self.max_rows_per_group:
                keep = max(1, len(labelled) // 10)
                head, tail = labelled[:keep], labelled[keep:]
                labelled = head + rng.sample(tail, max(0, self.max_rows_per_group - keep))
            out.extend(labelled)
        return out

    def _train(self, sample: Sequence[tuple[ExperienceRow, float]], objective: str,
               with_raw: bool = True) -> tuple[Any, list[str]]:
        import lightgbm as lgb

        dicts = [self._features(row, with_raw=with_raw) for row, _ in sample]
        columns = sorted({name for d in dicts for name in d})
        x = self._matrix(dicts, columns)
        params: dict[str, Any] = {  # lightgbm's parameters: numbers, flags, names
            "verbose": -1, "num_threads": self.threads, "learning_rate": 0.08,
            "num_leaves": 31, "min_data_in_leaf": 20, "feature_fraction": 0.9,
            "bagging_fraction": 0.8, "bagging_freq": 1, "seed": self.seed,
            "max_bin": 63, "deterministic": True, "force_row_wise": True}
        labels = np.array([lab for _, lab in sample])
        if objective == "lambdarank":
            groups: list[tuple[str, str, str]] = []
            sizes: list[int] = []
            for row, _ in sample:
                if groups and groups[-1] == row.group:
                    sizes[-1] += 1
                else:
                    groups.append(row.group)
                    sizes.append(1)
            params.update(objective="lambdarank", lambdarank_truncation_level=30,
                          label_gain=[0, 1, 3, 7, 15])
            data = lgb.Dataset(x, np.array([_grade(v) for v in labels]), group=sizes)
        else:
            params.update(objective="regression")
            weights = None
            if objective == "regression_top":  # the near-best rows decide the order's head
                weights = 1.0 + TOP_WEIGHT * np.exp(-labels / math.log(1.1))
            data = lgb.Dataset(x, labels, weight=weights)
        return lgb.train(params, data, self.n_estimators), columns

    def _model(self, with_raw: bool) -> tuple[Any, list[str]]:
        if not self._models:
            raise RuntimeError("fit() the model first")
        if with_raw not in self._models:
            self._models[with_raw] = self._train(self._sample_rows, self.chosen_objective or
                                                 "regression", with_raw)
        return self._models[with_raw]

    def fit(self, rows: Sequence[ExperienceRow]) -> CostModel:
        """Train on measured rows (many ops, shapes, GPUs). Rows of one group must share
        their GPU's facts."""
        if not rows:
            raise ValueError("no training rows")
        self.tables = group_tables(rows)
        self.train_gpus = {r.gpu for r in rows}
        self.train_ops = {r.op for r in rows}
        objective = self.objective
        if objective == "auto":
            objective = self._select_objective(rows)
        self.chosen_objective = objective
        self._sample_rows = self._sample(rows)
        self._models = {True: self._train(self._sample_rows, objective)}
        self._measured, self._weights, self._residual = [], None, None
        self._rows, self._calibration = list(rows), None
        self._refits, self._order = None, None
        return self

    def refit(self, rows: Sequence[ExperienceRow]) -> CostModel:
        """A new model with this one's settings (its chosen objective, trees, sampling,
        seed) fit on ``rows``."""
        return CostModel(objective=self.chosen_objective or self.objective,
                         n_estimators=self.n_estimators,
                         max_rows_per_group=self.max_rows_per_group, seed=self.seed,
                         min_update=self.min_update, threads=self.threads,
                         objectives=self.objectives).fit(rows)

    def _select_objective(self, rows: Sequence[ExperienceRow]) -> str:
        """The objective with the better mean best-of-top-10 on inner folds of ``rows``
        (leave-one-GPU-out over INNER_FOLDS training GPUs, else leave-one-op-out)."""
        unit = "gpu" if len({r.gpu for r in rows}) > 1 else "op"
        values = sorted({getattr(r, unit) for r in rows})
        # INNER_FOLDS held-out units spread over the sorted list (first and last for 2)
        picks = {round(i * (len(values) - 1) / max(1, INNER_FOLDS - 1))
                 for i in range(min(INNER_FOLDS, len(values)))}
        folds = [values[i] for i in sorted(picks)]
        scores: dict[str, list[float]] = {o: [] for o in self.objectives}
        for held in folds:
            train = [r for r in rows if getattr(r, unit) != held]
            test = [r for r in rows if getattr(r, unit) == held]
            if not train or not test:
                continue
            for objective in self.objectives:
                inner = CostModel(objective=objective, n_estimators=self.n_estimators,
                                  max_rows_per_group=self.max_rows_per_group, seed=self.seed,
                                  threads=self.threads)
                inner.fit(train)
                scores[objective].append(inner.top_k_regret(test, k=10))
        self.selection = {o: float(np.mean(v)) for o, v in scores.items() if v}
        if not self.selection:
            return "regression"
        return min(self.selection, key=self.selection.__getitem__)

    def top_k_regret(self, rows: Sequence[ExperienceRow], k: int = 10) -> float:
        """Mean over groups of log(best time among the model's top k / the group's best)."""
        grouped: dict[tuple[str, str, str], list[ExperienceRow]] = defaultdict(list)
        for row in rows:
            grouped[row.group].append(row)
        regrets = []
        for members in grouped.values():
            labels = relative_labels(members)
            scores = self.predict(members)
            top = np.argsort(scores, kind="stable")[:k]
            regrets.append(min(labels[i] for i in top))
        return float(np.mean(regrets)) if regrets else math.nan

    # the interval ----------------------------------------------------------------------
    @property
    def calibration(self) -> Calibration:
        """Computed on first use and kept with the model: up to CALIBRATION_FOLDS refits."""
        if self._calibration is None:
            self._calibration = self._calibrate(self._rows)
        return self._calibration

    def interval(self, op: str, predicted_rel: float, rank: int) -> tuple[float, float] | None:
        """The INTERVAL_LEVEL interval of a zero-shot predicted relative time at ``rank``
        (1 = first) of its ranking; None where the calibration has too few residuals. It
        always holds the prediction and never goes below 1x unless the prediction does
        (nothing beats the best)."""
        stratum = "head" if rank <= HEAD_RANKS else "rest"
        bounds = self.calibration.bounds.get((op, stratum))
        if bounds is None or not math.isfinite(predicted_rel) or predicted_rel <= 0:
            return None
        low, high = _interval_logs(np.array([math.log(predicted_rel)]), bounds)
        return math.exp(low[0]), math.exp(high[0])

    def _calibrate(self, rows: Sequence[ExperienceRow]) -> Calibration:
        """Leave-one-GPU-out residuals over up to CALIBRATION_FOLDS training GPUs (spread
        over the sorted list), each from a model of the same settings fit without it."""
        gpus = sorted({r.gpu for r in rows})
        if self.chosen_objective == "lambdarank":
            return Calibration(INTERVAL_LEVEL, {}, {}, (), "no interval: the lambdarank "
                               "objective predicts an order, not a time")
        if len(gpus) < 2:
            return Calibration(INTERVAL_LEVEL, {}, {}, tuple(gpus), "no interval: trained on "
                               f"one GPU ({', '.join(gpus) or 'none'}), none to hold out to "
                               "measure how far the model misses on a new one")
        held_out = self._held_out_gpus()
        found = self._held_out_pairs(rows, held_out)
        counts = {k: sum(len(v) for v in groups.values()) for k, groups in found.items()}
        bands = {k: _gpu_band([np.array(v) for v in groups.values()])
                 for k, groups in found.items() if counts[k] >= MIN_RESIDUALS}
        return Calibration(INTERVAL_LEVEL, {k: b[0] for k, b in bands.items()}, counts,
                           held_out, _calibration_note(held_out, counts, bands),
                           {k: b[1] for k, b in bands.items()},
                           {k: b[2] for k, b in bands.items()})

    def _held_out_pairs(self, rows: Sequence[ExperienceRow], held_out: Sequence[str]
                        ) -> dict[tuple[str, str], dict[str, list[tuple[float, float]]]]:
        """(op, stratum) -> held-out GPU -> (predicted, measured) log relative times, each
        GPU's from this model refit without it (``_without``)."""
        found: dict[tuple[str, str], dict[str, list[tuple[float, float]]]] = defaultdict(
            lambda: defaultdict(list))
        for held in held_out:
            inner = self._held_out_refits()[held]
            by_op: dict[str, list[ExperienceRow]] = defaultdict(list)
            for r in rows:
                if r.gpu == held:
                    by_op[r.op].append(r)
            for op, members in by_op.items():
                orders = self.orders_for(op) if op in self.order_scores else ("model",)
                for rank, predicted, measured in inner._held_out_ranks(members, orders):
                    stratum = "head" if rank <= HEAD_RANKS else "rest"
                    found[(op, stratum)][held].append((predicted, measured))
        return found

    def _held_out_gpus(self) -> tuple[str, ...]:
        """Up to CALIBRATION_FOLDS training GPUs, spread over the sorted list."""
        gpus = sorted(self.train_gpus)
        picks = range(len(gpus)) if len(gpus) <= CALIBRATION_FOLDS else sorted(
            {round(i * (len(gpus) - 1) / (CALIBRATION_FOLDS - 1))
             for i in range(CALIBRATION_FOLDS)})
        return tuple(gpus[i] for i in picks)

    def _held_out_refits(self) -> dict[str, CostModel]:
        """This model refit without each of ``_held_out_gpus`` (one refit each), made once
        and shared by the interval's calibration and the choice of order."""
        if self._refits is None:
            self._refits = {gpu: self._without(gpu) for gpu in self._held_out_gpus()}
        return self._refits

    # the zero-shot order: the model's and the simple baselines', taken in turn -------
    def orders_for(self, op: str) -> tuple[str, ...]:
        """The zero-shot orders ``rank`` takes configurations from in turn for ``op``: the
        model's and each of BASELINES', best first by their regret on the training GPUs
        each held out of a refit (the mean of the first proposal's and the best of the
        first 10's log time over the best). Why in turn and not the winner alone: which
        order is right for a new GPU depends on what is in the store (a near-twin GPU
        makes the most similar GPU's order exact; held-out training GPUs have no twin), so
        no choice made on the training GPUs is safe alone; in turn, a walk reaches what
        the best of them would within a factor of their number, and the first proposal is
        the validated best's."""
        scores = self.order_scores.get(op)
        if not scores:
            return ("model",)
        return tuple(sorted(scores, key=lambda o: (scores[o], o != "model")))

    @property
    def order_scores(self) -> dict[str, dict[str, float]]:
        """op -> each zero-shot order's held-out regret, as ``orders_for`` sorts them."""
        if self._order is None:
            self._order = self._score_orders()
        return self._order

    def _score_orders(self) -> dict[str, dict[str, float]]:
        if len(self.train_gpus) < 3:  # a held-out GPU's baselines need two others
            return {}
        regrets: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for held, inner in self._held_out_refits().items():
            groups: dict[tuple[str, str, str], list[ExperienceRow]] = defaultdict(list)
            for r in self._rows:
                if r.gpu == held:
                    groups[r.group].append(r)
            for (op, _, _), members in groups.items():
                labels = relative_labels(members)
                model = inner._predict_with(members, None, None, 0)
                for order in ORDERS:
                    scores = model if order == "model" else inner._baseline_scores(
                        members, order, model)
                    ranked = np.argsort(scores, kind="stable")
                    regrets[op][order].append(0.5 * (
                        labels[ranked[0]] + min(labels[i] for i in ranked[:HEAD_RANKS])))
        return {op: {o: float(np.mean(v)) for o, v in by.items()}
                for op, by in regrets.items()}

    def _consensus_scores(self, rows: Sequence[ExperienceRow], model: np.ndarray
                          ) -> np.ndarray:
        """Rows scored by the consensus of the training GPUs (CONSENSUS: their time /
        best, weighted by similarity to the row's GPU), where the first proposal comes
        from. Why not the validated best order's first: a first proposal is one bet, and
        a weighted mean over every source misses less often than any one source does (the
        most similar GPU is sometimes unlike the target, the model's best guess sometimes
        off the measured ground), while the choice between orders, made on 5 or fewer
        held-out training GPUs, is itself noisy. It leads only where the baselines'
        orders are in use (``orders_for``: three or more training GPUs); where no
        training GPU measured a configuration it falls back on the model's order."""
        return self._baseline_scores(rows, CONSENSUS, model)

    def _leads(self, rows: Sequence[ExperienceRow], model: np.ndarray) -> list[np.ndarray]:
        """Rows scored for the head of the zero-shot list, in the order ``_lead`` applies
        them (the last leads): the geometric consensus (the similarity-weighted mean of
        the log relative time), then the consensus (of time / best,
        ``_consensus_scores``). So the first proposal is the safe bet, the one that is
        never far off on the training GPUs, and the second the one that is at their best
        most often: the mean of the log forgives a configuration 2x slow on one GPU for
        being a few percent faster on the others, which the first proposal cannot
        afford and the second can. The same configuration twice is proposed once."""
        return [self._baseline_scores(rows, GEOMETRIC_CONSENSUS, model),
                self._consensus_scores(rows, model)]

    def _baseline_scores(self, rows: Sequence[ExperienceRow], order: str,
                         model: np.ndarray) -> np.ndarray:
        """Rows scored by a simple baseline (lower = faster); a configuration no training
        GPU measured goes after every one that was, in the model's order among them."""
        if order == CONSENSUS:
            values = np.array([consensus_value(r.key, r.gpu, r.gpu_facts,
                                               self.tables.get((r.op, r.shape), {}),
                                               self.similarity) for r in rows])
        else:
            feature = "stack.sim_rel" if order == GEOMETRIC_CONSENSUS else BASELINES[order]
            values = np.array([stack_features(r.key, r.gpu, r.gpu_facts,
                                              self.tables.get((r.op, r.shape), {}), None,
                                              self.similarity)[feature]
                               for r in rows])
        known = np.isfinite(values)
        if not known.any():
            return model
        spread = float(np.nanmax(values) - np.nanmin(values)) + 1.0
        rest = float(np.nanmax(values)) + spread + (model - np.min(model))
        return np.where(known, values, rest)

    def _without(self, gpu: str) -> CostModel:
        """This model refit without one training GPU: its groups' tables and its sample of
        rows less that GPU's (a group's table and sample do not depend on the other
        groups), trained afresh with the same settings; the row facts cache is shared."""
        inner = CostModel(objective=self.chosen_objective or "regression",
                          n_estimators=self.n_estimators,
                          max_rows_per_group=self.max_rows_per_group, seed=self.seed,
                          threads=self.threads)
        inner._static, inner._similarity = self._static, self._similarity
        inner.tables = {key: kept for key, tables in self.tables.items()
                        if (kept := {g: t for g, t in tables.items() if g != gpu})}
        inner._sample_rows = [(r, lab) for r, lab in self._sample_rows if r.gpu != gpu]
        inner.train_gpus = self.train_gpus - {gpu}
        inner.train_ops = {r.op for r, _ in inner._sample_rows}
        inner.chosen_objective = self.chosen_objective or "regression"
        inner._models = {True: inner._train(inner._sample_rows, inner.chosen_objective)}
        return inner

    def _held_out_ranks(self, rows: Sequence[ExperienceRow], orders: Sequence[str] = ("model",)
                        ) -> list[tuple[int, float, float]]:
        """(rank, predicted, measured log relative time) per timed configuration of one op
        on one GPU the model did not see, ranked as rank() orders them: ``orders`` taken
        in turn (the outer model's ``orders_for``), each by the mean over the shapes,
        among all of that GPU's configurations, failed ones too. The first HEAD_RANKS
        are all kept (what a user reads); of the rest, at most CALIBRATION_CONFIGS drawn
        at random."""
        best: dict[str, float] = {}
        for r in rows:
            if r.time_ms and not r.failed:
                best[r.shape] = min(best.get(r.shape, math.inf), r.time_ms)
        predicted = self._predict_with(rows, None, None, 0)
        scores: dict[str, list[float]] = defaultdict(list)
        measured: dict[str, list[float]] = defaultdict(list)
        for r, p in zip(rows, predicted, strict=True):
            scores[r.key].append(float(p))
            if r.time_ms and not r.failed:
                measured[r.key].append(math.log(r.time_ms / best[r.shape]))
        mean = {k: sum(v) / len(v) for k, v in scores.items()}
        ranked = []
        for name in orders:
            values = predicted if name == "model" else self._baseline_scores(
                rows, name, predicted)
            by: dict[str, list[float]] = defaultdict(list)
            for r, v in zip(rows, values, strict=True):
                by[r.key].append(float(v))
            means = {k: round(sum(v) / len(v), 9) for k, v in by.items()}
            ranked.append(sorted(means, key=lambda k: (means[k], k)))
        order = _in_turn(ranked)
        if len(orders) > 1:  # as rank() leads
            for consensus in self._leads(rows, predicted):
                by_consensus: dict[str, list[float]] = defaultdict(list)
                for r, v in zip(rows, consensus, strict=True):
                    by_consensus[r.key].append(float(v))
                means = {k: round(sum(v) / len(v), 9) for k, v in by_consensus.items()}
                order = _lead(order, sorted(means, key=lambda k: (means[k], k)))
        rest = order[HEAD_RANKS:]
        if len(rest) > CALIBRATION_CONFIGS:
            drawn = set(random.Random(self.seed).sample(rest, CALIBRATION_CONFIGS))
            order = order[:HEAD_RANKS] + [k for k in rest if k in drawn]
        return [(rank, mean[k], sum(measured[k]) / len(measured[k]))
                for rank, k in enumerate(order, 1) if k in measured]

    # prediction ------------------------------------------------------------------------
    def predict(self, rows: Sequence[ExperienceRow]) -> np.ndarray:
        """Predicted score per row (lower = faster): log relative time for regression."""
        return self._predict_with(rows, self._weights, self._residual, len(self._measured))

    def _predict_with(self, rows: Sequence[ExperienceRow], weights: Mapping[str, float] | None,
                      residual: tuple[Any, bool] | None, k: int) -> np.ndarray:
        with_raw = all(r.op in self.train_ops for r in rows)
        booster, columns = self._model(with_raw)
        x = self._matrix([self._features(r, weights, with_raw) for r in rows], columns)
        base = booster.predict(x, num_threads=self.threads)
        if self.chosen_objective == "lambdarank":
            base = -base  # LambdaRank scores relevance: higher is better
        if residual is not None and residual[1] == with_raw:
            # shrunk by k / (k + RESIDUAL_PRIOR): a few measurements nudge, many decide
            base = base + k / (k + RESIDUAL_PRIOR) * residual[0].predict(
                x, num_threads=self.threads)
        return base

    def rank(self, candidates: Sequence[ExperienceRow], neighbours: int = 3,
             evidence_for: int = 20) -> list[RankedConfig]:
        """Candidate configurations best first, each with its predicted relative time
        (geomean over its shapes); the first ``evidence_for`` carry evidence: the same
        config on the most similar training GPUs."""
        scores = self.predict(candidates)
        by_config: dict[str, list[int]] = defaultdict(list)
        for i, row in enumerate(candidates):
            by_config[row.key].append(i)
        # at an equal prediction a configuration some GPU measured goes first: a knob whose
        # value no training row has (a variant added since) cannot move the model, so its
        # unmeasured twins tie with the measured ones and would otherwise win on order
        seen = {key for tables in self.tables.values() for table in tables.values()
                for key in table.entries}

        def by(values: np.ndarray) -> list[str]:
            return sorted(by_config, key=lambda k: (
                round(float(np.mean(values[by_config[k]])), 9), k not in seen))

        # zero-shot, the orders in turn (orders_for); once the target's own measurements
        # improve the model (an accepted update), the model's alone
        orders = ("model",) if self.update_accepted or not candidates else \
            self.orders_for(candidates[0].op)
        order = _in_turn([by(scores if o == "model" else
                             self._baseline_scores(candidates, o, scores)) for o in orders])
        if len(orders) > 1:  # the baselines' orders are in use: the consensus leads
            for consensus in self._leads(candidates, scores):
                order = _lead(order, by(consensus))
        if self.launch_limits:
            order = _feasible_first(order, self.cannot_launch(candidates))
        measured = self._measured_rel_times()
        ranked = []
        for position, key in enumerate(order):
            idx = by_config[key]
            score = float(np.mean(scores[idx]))
            first = candidates[idx[0]]
            rel = math.exp(score) if self.chosen_objective != "lambdarank" else math.nan
            ranked.append(RankedConfig(
                config=first.config, predicted_rel_time=rel, score=score,
                evidence=self.evidence(first, neighbours) if position < evidence_for else [],
                measured_rel_time=measured.get(key)))
        return ranked

    def cannot_launch(self, candidates: Sequence[ExperienceRow]) -> set[str]:
        """Keys of configurations that cannot launch on their GPU on some shape: the launch
        model's shared memory per program exceeds the GPU's per SM (``smem_share`` > 1).
        Physics, not a fit: no GPU runs such a program, so no measurement is needed to
        know it fails; a model trained on tasks that never reached the limit cannot learn
        it (leave-one-task-out: attention's first three zero-shot picks were these)."""
        out = set()
        for row in candidates:
            if row.launch is None:
                continue
            static = self._static.get((row.op, row.shape, row.gpu, row.key))
            derived = static[1] if static else derive_features(
                row.launch, row.gpu_facts, row.bytes_moved, row.flops)
            if derived.get("smem_share", 0.0) > 1.0:
                out.add(row.key)
        return out

    def evidence(self, row: ExperienceRow, top: int = 3) -> list[Neighbour]:
        """The same configuration on the most similar training GPUs (same op and shape)."""
        found = []
        for name, table in self.tables.get((row.op, row.shape), {}).items():
            if name == row.gpu or row.key not in table.entries:
                continue
            rel, rank = table.entries[row.key]
            timed = row.key in table.measured
            found.append(Neighbour(gpu=name, similarity=self.similarity(row.gpu_facts, table.facts),
                                   rel_time=math.exp(rel) if timed else None, rank_pct=rank,
                                   shape=row.shape))
        found.sort(key=lambda n: -n.similarity)
        return found[:top]

    def _measured_rel_times(self) -> dict[str, float]:
        """config key -> measured time / best measured so far on the target (geomean)."""
        best: dict[str, float] = {}
        for r in self._measured:
            if r.time_ms and not r.failed:
                best[r.shape] = min(best.get(r.shape, math.inf), r.time_ms)
        ratios: dict[str, list[float]] = defaultdict(list)
        for r in self._measured:
            if r.time_ms and not r.failed:
                ratios[r.key].append(r.time_ms / best[r.shape])
        return {k: geomean(v) for k, v in ratios.items()}

    # updates ---------------------------------------------------------------------------
    def update(self, measurements: Sequence[ExperienceRow]) -> CostModel:
        """Take the target's measurements so far (all of them, each call); see the module
        docstring. From ``min_update`` measurements on, the updated model (agreement
        weights + residual) is kept only if it orders held-out measurements better than
        the zero-shot model does (4-fold cross-validation over the measured configs);
        ``update_accepted`` says which happened."""
        self._measured = list(measurements)
        self._weights, self._residual = None, None
        self.update_accepted = False
        if len(self._measured) < self.min_update:
            return self
        if self._update_helps(self._measured):
            self._weights = self._agreement_weights(self._measured)
            self._residual = self._fit_residual(self._measured, self._weights)
            self.update_accepted = True
        return self

    def _update_helps(self, rows: Sequence[ExperienceRow], folds: int = 4) -> bool:
        """Cross-validated on the measured configurations: does the update's order of a
        held-out fold agree with its measured order better than the zero-shot order?"""
        labels = _labels_by_shape(rows)
        keys = sorted({r.key for r in rows})
        folds = min(folds, len(keys))
        updated: list[float] = []
        zero_shot: list[float] = []
        truth: list[float] = []
        for fold in range(folds):
            held = {k for i, k in enumerate(keys) if i % folds == fold}
            train = [r for r in rows if r.key not in held]
            test = [i for i, r in enumerate(rows) if r.key in held]
            if len({r.key for r in train}) < 3 or not test:
                continue
            weights = self._agreement_weights(train)
            residual = self._fit_residual(train, weights)
            test_rows = [rows[i] for i in test]
            updated.extend(self._predict_with(test_rows, weights, residual, len(train)))
            zero_shot.extend(self._predict_with(test_rows, None, None, 0))
            truth.extend(labels[i] for i in test)
        if len(truth) < 3:
            return False
        return _spearman(updated, truth) > _spearman(zero_shot, truth)

    def _agreement_weights(self, measured: Sequence[ExperienceRow]) -> dict[str, float]:
        """Per training GPU: facts similarity ** STACK_POWER x agreement with the target's
        measured order (Spearman, floored at 0.05), from 3 shared configurations on."""
        target = measured[0]
        pairs: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
        by_shape: dict[str, list[ExperienceRow]] = defaultdict(list)
        for r in measured:
            by_shape[r.shape].append(r)
        for shape, members in by_shape.items():
            labels = relative_labels(members)
            for r, lab in zip(members, labels, strict=True):
                for name, table in self.tables.get((r.op, shape), {}).items():
                    if name != r.gpu and r.key in table.entries:
                        pairs[name][0].append(lab)
                        pairs[name][1].append(table.entries[r.key][0])
        weights = {}
        for name in {g for tables in self.tables.values() for g in tables}:
            facts = next(t[name].facts for t in self.tables.values() if name in t)
            prior = self.similarity(target.gpu_facts, facts) ** STACK_POWER
            mine, theirs = pairs.get(name, ([], []))
            if len(mine) >= 3 and len(set(mine)) > 1 and len(set(theirs)) > 1:
                agreement = max(0.05, _spearman(mine, theirs))
                weights[name] = prior * agreement
            else:
                weights[name] = prior
        return weights

    def _fit_residual(self, rows: Sequence[ExperienceRow], weights: Mapping[str, float]
                      ) -> tuple[Any, bool]:
        import lightgbm as lgb

        labels = np.array(_labels_by_shape(rows))
        with_raw = all(r.op in self.train_ops for r in rows)
        booster, columns = self._model(with_raw)
        x = self._matrix([self._features(r, weights, with_raw) for r in rows], columns)
        base = booster.predict(x, num_threads=self.threads)
        if self.chosen_objective == "lambdarank":
            base = -base
        # the target's best is not known yet: fit deviations, not the level
        residual = labels - base
        residual -= np.median(residual)
        params = {"objective": "regression", "verbose": -1, "num_threads": self.threads,
                  "learning_rate": 0.3, "num_leaves": 4, "min_data_in_leaf": 2,
                  "min_data_in_bin": 1, "seed": self.seed, "deterministic": True,
                  "force_row_wise": True, "lambda_l2": 1.0}
        rounds = min(30, 2 * len(rows))
        return lgb.train(params, lgb.Dataset(x, residual), rounds), with_raw


def _lead(order: Sequence[str], lead: Sequence[str]) -> list[str]:
    """``order`` with ``lead``'s first key moved to the front."""
    if not lead:
        return list(order)
    return [lead[0], *(k for k in order if k != lead[0])]


def _feasible_first(order: Sequence[str], infeasible: set[str]) -> list[str]:
    """``order`` with the keys in ``infeasible`` moved to its end, each part in order."""
    return [k for k in order if k not in infeasible] + [k for k in order if k in infeasible]


def _in_turn(orders: Sequence[Sequence[str]]) -> list[str]:
    """One key from each order in turn, each key once."""
    out: list[str] = []
    taken: set[str] = set()
    for row in zip(*orders, strict=True):
        for key in row:
            if key not in taken:
                taken.add(key)
                out.append(key)
    return out


def _conformal_band(values: np.ndarray, level: float = INTERVAL_LEVEL
                    ) -> tuple[float, float]:
    """The central ``level`` band of held-out residuals with split conformal's finite-sample
    correction (each tail's quantile taken at (n + 1) / n of its level), so a band of few
    residuals is not too narrow."""
    n = len(values)
    high = min(1.0, (1 - (1 - level) / 2) * (n + 1) / n)
    return (float(np.quantile(values, 1 - high, method="lower")),
            float(np.quantile(values, high, method="higher")))


def _calibration_note(held_out: Sequence[str], counts: Mapping[tuple[str, str], int],
                      bands: Mapping[tuple[str, str], tuple[Any, float, float]]) -> str:
    """What the intervals stand on: residuals, GPUs, widening; where there are none and
    where even the widest band fell short on the held-out GPUs."""
    short = sorted(f"{op} ({stratum})" for op, stratum in counts if (op, stratum) not in bands)
    narrow = [f"{op} ({stratum}), {100 * b[2]:.0f}%" for (op, stratum), b in bands.items()
              if b[2] < INTERVAL_LEVEL]
    widest = max((b[1] for b in bands.values()), default=1.0)
    return (f"{int(100 * INTERVAL_LEVEL)}% intervals from {sum(counts.values())} residuals on "
            f"{len(held_out)} held-out training GPU(s) ({', '.join(held_out)})"
            + (f", widened up to {widest:g}x because one GPU's misses go together"
               if widest > 1 else "")
            + (f"; none for {', '.join(short)}: under {MIN_RESIDUALS} residuals"
               if short else "")
            + (f"; held-out GPUs covered under {int(100 * INTERVAL_LEVEL)}% even at "
               f"{WIDEN[-1]:g}x for {'; '.join(narrow)}: too narrow there" if narrow else ""))


def _widened(band: tuple[float, float], centre: float, factor: float) -> tuple[float, float]:
    return centre + factor * (band[0] - centre), centre + factor * (band[1] - centre)


def _interval_logs(predicted: np.ndarray, band: tuple[float, float]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Log bounds of the intervals of log predictions under a log-ratio band: they hold
    the prediction, and the low end stays at or above 0 (1x) unless the prediction is
    below."""
    low = np.minimum(predicted, np.maximum(0.0, predicted + band[0]))
    return low, np.maximum(predicted, predicted + band[1])


def _gpu_band(groups: Sequence[np.ndarray], level: float = INTERVAL_LEVEL
              ) -> tuple[tuple[float, float], float, float]:
    """(band, factor, held-out coverage) from (predicted, measured) log pairs, one array
    per held-out GPU: the pooled conformal band widened by the least factor of WIDEN at
    which the band of the other GPUs covers each GPU's pairs ``level`` on average (see
    Calibration)."""
    def residuals(parts: Sequence[np.ndarray]) -> np.ndarray:
        both = np.concatenate(parts)
        return both[:, 1] - both[:, 0]

    groups = [g for g in groups if len(g)]
    pooled = residuals(groups)
    folds = []  # (band, median) of the other GPUs', and this GPU's pairs
    for i, group in enumerate(groups):
        others = residuals([g for j, g in enumerate(groups) if j != i]) if len(groups) > 1 \
            else pooled
        folds.append((_conformal_band(others, level), float(np.median(others)), group))
    coverage = 0.0
    for factor in WIDEN:
        shares = []
        for band, centre, group in folds:
            low, high = _interval_logs(group[:, 0], _widened(band, centre, factor))
            shares.append(float(np.mean((low <= group[:, 1]) & (group[:, 1] <= high))))
        coverage = float(np.mean(shares))
        if coverage >= level:
            break
    return (_widened(_conformal_band(pooled, level), float(np.median(pooled)), factor),
            factor, coverage)


def _labels_by_shape(rows: Sequence[ExperienceRow]) -> list[float]:
    """relative_labels of measured rows, each against the best of its own shape."""
    labels = [0.0] * len(rows)
    by_shape: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_shape[r.shape].append(i)
    for idx in by_shape.values():
        for i, lab in zip(idx, relative_labels([rows[i] for i in idx]), strict=True):
            labels[i] = lab
    return labels


def _spearman(a: Sequence[float], b: Sequence[float]) -> float:
    ra = np.argsort(np.argsort(a, kind="stable"), kind="stable").astype(float)
    rb = np.argsort(np.argsort(b, kind="stable"), kind="stable").astype(float)
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])
