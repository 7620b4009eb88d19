"""The learned ranker where users meet it: an op's configurations ranked for a target GPU.

``predict`` trains the cost model (retrieval/ranker.py) on the store's measurements of the
op on the *other* GPUs, feeds it the target's own measurements where there are any
(``CostModel.update``), and ranks the candidate configurations on the target's facts, each
with its predicted time relative to the target's best and the evidence behind it (the same
configuration's relative time and rank on the most similar measured GPUs).

Candidates and launches come from a ``Space`` the caller builds: for a task of kernels/,
its whole legal space and ``Task.launch`` (optimizer/spaces.py; retrieval may not import
kernels); for an imported op with no task, ``store_space``: the configurations seen in the
store and Kernel Tuner's launch conventions (retrieval/launch.py).

The target is named by name (facts from kernels.shared.gpus; an unknown name is an error that
lists the known parts and the closest one) or by explicit facts, as the bootstrap plan
always took them (``resolve_target``).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from sqlalchemy import or_
from sqlmodel import Session, col, select

from kernelkb.kb.models import Experience
from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.shared.errors import UserError
from kernelkb.kernels.shared.gpus import PART_FACTS, family_facts, lookup, unknown_gpu_message
from kernelkb.retrieval.first_try import time_vs_best
from kernelkb.retrieval.launch import config_launch, record_launch
from kernelkb.retrieval.ranker import (
    CostModel,
    ExperienceRow,
    candidate_rows,
    config_key,
    default_facts,
    rows_from_records,
)
from kernelkb.retrieval.schemas import Prediction, RankedItem, RankedNeighbour
from kernelkb.retrieval.untimed import on_hardware
from kernelkb.retrieval.walk import replay

FACT_KEYS = ("arch", "vendor", "sm_count", "mem_bandwidth_gbps", "smem_per_sm_kib",
             "peak_tflops")
SHAPES = 3  # shapes a ranking is predicted over: the op's most measured ones
NEIGHBOURS = 3


class UnknownGpu(UserError):
    """A target named by a name the facts table does not know, with no facts given."""


class NoEvidence(LookupError):
    """Nothing measured on another GPU to learn from, or no candidate to rank."""


@dataclass(frozen=True)
class Space:
    """What the caller knows of an op: its candidate configurations and how they run."""

    op_type: str
    task_id: str | None
    configs: Sequence[Mapping[str, Any]]
    launch_of_config: Callable[[Mapping[str, Any], str], Any]  # (config, shape label)
    launch_of_record: Callable[[ExperienceRecord, str], Any]
    cost_of_shape: Callable[[str], tuple[float | None, float | None]] | None = None
    cost_of_record: Callable[[ExperienceRecord, str], tuple[float | None, float | None]] | None \
        = None
    shapes: Sequence[str] | None = None  # None: the op's most measured shapes in the store
    # a stored configuration as a point of ``configs`` (e.g. a task's knob added after the
    # record was measured filled in with its default); None: configurations as stored
    config_of_record: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None
    # the knob names of ``configs`` where the space was read from the store: a record that
    # sets other knobs belongs to another kernel of the same name and is not learned from
    parameters: frozenset[str] | None = None
    note: str = ""  # what choosing the space left out, said in the prediction's note


def resolve_target(target: Mapping[str, Any]) -> dict[str, Any]:
    """The bootstrap target with its facts: a known name fills in what the table knows
    (explicit values win); a name the table lacks takes what its architecture fixes
    (``family_facts``: shared memory, registers, warp width; its SMs and bandwidth left
    unknown and named so), under any facts given; only a name that implies no known
    architecture and comes with no facts raises ``UnknownGpu``."""
    out = {k: v for k, v in target.items() if v is not None}
    explicit = any(k in out for k in FACT_KEYS)
    name = str(out.get("gpu_name") or "")
    found = lookup(name) if name else None
    if found is None:
        family = family_facts(name) if name else None
        if family is not None:
            given = [k for k in PART_FACTS if k in out]
            unknown = [k for k in PART_FACTS if k not in out]
            return {**family, **out, "unknown_facts": ", ".join(unknown) or None,
                    "facts_from": family["facts_from"]
                    + (f"; given: {', '.join(given)}" if given else "")}
        if not explicit:
            raise UnknownGpu(unknown_gpu_message(name) + ". Or give its facts (arch, "
                             "sm_count, mem_bandwidth_gbps, ...: see `kernelkb bootstrap "
                             "--help`)")
        return out
    return {**found.facts(), **out, "gpu_name": found.name if not explicit else name}


def measured_records(session: Session, op_type: str) -> list[Any]:
    """What the ranker learns from: the op's timed experiences and its failures, as light
    views of the stored JSON (the fields the ranker reads, with ExperienceRecord's
    attribute names): validating 30,000 imported records took 26 s, parsing them ~2 s.
    The CPU interpreter's rows (failures included) say nothing of any GPU: left out."""
    stmt = select(Experience.evidence, Experience.record_json).where(
        Experience.op_type == op_type, on_hardware()).where(or_(
            col(Experience.evidence) == "measured",
            col(Experience.verdict).in_(("failed", "incorrect"))))
    return [_view(evidence, json.loads(text)) for evidence, text in session.exec(stmt).all()]


def _view(evidence: str, data: dict[str, Any]) -> SimpleNamespace:
    fb = data["feedback"]
    return SimpleNamespace(
        id=data.get("id"), evidence=evidence, verdict=data["verdict"],
        task=SimpleNamespace(**data["task"]), env=SimpleNamespace(**data["env"]),
        edit=SimpleNamespace(config=data["edit"].get("config") or {}),
        feedback=SimpleNamespace(
            timings=[SimpleNamespace(**t) for t in fb.get("timings") or []],
            timing_available=bool(fb.get("timing_available")),
            suspect=bool(fb.get("suspect"))))


def store_space(records: Sequence[ExperienceRecord], op_type: str) -> Space:
    """An op with no task: the configurations seen in the store, Kernel Tuner's launch
    conventions where a shape label carries a problem size (retrieval/launch.py).

    Two kernels imported under one name with different parameters (two data sets'
    ``convolution``) are two spaces, not one: the space is the parameter family with the
    most measured configurations (then the most GPUs), and the others are left out of
    the ranking and of what the model learns from, and named in the note."""
    families: dict[frozenset[str], dict[str, Mapping[str, Any]]] = {}
    gpus: dict[frozenset[str], set[str]] = {}
    for record in records:
        if record.edit.config:
            family = frozenset(record.edit.config)
            families.setdefault(family, {}).setdefault(
                repr(sorted(record.edit.config.items())), dict(record.edit.config))
            gpus.setdefault(family, set()).add(record.env.gpu_name)
    if not families:
        return Space(op_type=op_type, task_id=None, configs=[],
                     launch_of_config=config_launch, launch_of_record=record_launch)
    chosen = max(families, key=lambda f: (len(families[f]), len(gpus[f]), sorted(f)))
    others = [f for f in families if f != chosen]
    note = "" if not others else (
        f"; {sum(len(families[f]) for f in others)} configurations of {len(others)} other "
        f"kernel(s) named {op_type} with other parameters left out (this space: "
        f"{', '.join(sorted(chosen))}; "
        + "; ".join(", ".join(sorted(f)) for f in sorted(others, key=sorted)[:3]) + ")")
    return Space(op_type=op_type, task_id=None, configs=list(families[chosen].values()),
                 launch_of_config=config_launch, launch_of_record=record_launch,
                 parameters=chosen, note=note)


def predict(records: Sequence[Any], space: Space, target: Mapping[str, Any],
            limit: int = 10, model: CostModel | None = None,
            facts_of: Callable[[Any], dict[str, Any]] = default_facts) -> Prediction:
    """Rank ``space``'s configurations on ``target`` (resolved facts, see resolve_target);
    ``records``: ExperienceRecords or ``measured_records``' views of them. ``facts_of``:
    a record's GPU facts (default: its own fingerprint over the facts table; the store
    passes its one fingerprint per GPU, so the similarities printed here are the plan's)."""
    facts = default_facts(_Env(target))
    facts["gpu_name"] = gpu = str(target.get("gpu_name") or "target")
    if space.parameters is not None:  # another kernel of the same name: not this space
        records = [r for r in records if frozenset(r.edit.config) == space.parameters]
    if space.config_of_record is not None:
        records = [_with_config(r, space.config_of_record(r.edit.config)) for r in records]
    mine = [r for r in records if r.env.gpu_name == gpu]
    others = [r for r in records if r.env.gpu_name != gpu]
    rows = rows_from_records(others, space.launch_of_record, facts_of,
                             cost_of=space.cost_of_record)
    timed = [r for r in rows if r.time_ms and not r.failed]
    if not timed:
        raise NoEvidence(f"no measurement of {space.op_type} on a GPU other than {gpu} to "
                         "learn from")
    if not space.configs:
        raise NoEvidence(f"no candidate configuration of {space.op_type} to rank")
    shapes = list(space.shapes or _measured_shapes(timed, space))
    if not shapes:
        raise NoEvidence(f"no shape of {space.op_type} to predict over")
    model = model or CostModel().fit(rows)
    own = rows_from_records(mine, space.launch_of_record, facts_of,
                            cost_of=space.cost_of_record)
    own_timed = [r for r in own if r.time_ms and not r.failed]
    if own_timed:
        model.update(own_timed)
    candidates = candidate_rows(space.op_type, space.configs, shapes, facts,
                                space.launch_of_config, space.cost_of_shape)
    ranked = model.rank(candidates, neighbours=NEIGHBOURS, evidence_for=0)
    if own_timed:  # the walk's next proposals fill the unmeasured places (retrieval/walk.py)
        ranked = _walk_order(ranked, replay(model, candidates, rows, own_timed))
        model.update(own_timed)
    rows_of: dict[str, list[ExperienceRow]] = {}
    for row in candidates:
        rows_of.setdefault(row.key, []).append(row)
    calibration = model.calibration
    items = [_item(n, r, [e for row in rows_of[config_key(r.config)]
                          for e in model.evidence(row, NEIGHBOURS)],
                   model.interval(space.op_type, r.predicted_rel_time, n))
             for n, r in enumerate(ranked[:limit], 1)]
    calibrated = any(i.predicted_rel_low is not None for i in items)
    trained = Counter(r.gpu for r in timed)
    return Prediction(
        op_type=space.op_type, task_id=space.task_id, target_gpu=gpu,
        candidates=len(ranked), shapes=shapes, trained_on=dict(trained.most_common()),
        target_measurements=len({config_key(r.edit.config) for r in mine
                                 if r.evidence == "measured"}), items=items,
        note=(f"predicted by the learned cost model from {len(timed)} measurements on "
              f"{len(trained)} other GPU(s)"
              + (f" and {len(own_timed)} on {gpu}" if own_timed else "")
              + _order_note(model, space.op_type)
              + ("" if mine else f"; nothing of {space.op_type} was measured on {gpu}: a "
                 "hint, not a measurement") + space.note),
        interval_level=calibration.level if calibrated else None,
        interval_method=calibration.method if calibrated else None,
        interval_note=_interval_note(calibration.note, calibrated, bool(own_timed)))


ORDER_NAMES = {"model": "the model's", "most_similar_gpu": "the most similar GPU's",
               "mean_rank": "the mean normalised rank's"}


def _order_note(model: CostModel, op: str) -> str:
    """Which orders the ranking takes in turn, best first by their regret on the training
    GPUs held out in turn (the predicted times and intervals are the model's)."""
    orders = model.orders_for(op)
    if model.update_accepted or len(orders) < 2:
        return ""
    regret = model.order_scores[op]
    return ("; first the training GPUs' consensus (their relative times weighted by "
            f"similarity), then {len(orders)} orders in turn, " + ", then ".join(
                f"{ORDER_NAMES[o]} (held-out regret {regret[o]:.3f})" for o in orders))


def _interval_note(note: str, calibrated: bool, updated: bool) -> str:
    """The calibration's own note; with the target's measurements, a caveat: the intervals
    were calibrated on zero-shot predictions, which those measurements may have moved."""
    if calibrated and updated:
        return note + "; calibrated on zero-shot predictions, before the target's own " \
                      "measurements were taken in"
    return note


def _walk_order(ranked: Sequence[Any], walk: Sequence[str]) -> list[Any]:
    """The ranking with its measured configurations where the model puts them and the
    places between them taken by the unmeasured ones in the walk's order."""
    by_key = {config_key(r.config): r for r in ranked}
    proposals = iter(k for k in walk if k in by_key)
    return [r if r.measured_rel_time is not None else by_key[next(proposals, config_key(r.config))]
            for r in ranked]


def _with_config(record: Any, config: Mapping[str, Any]) -> Any:
    """A copy of a record (or of a measured_records view) whose edit carries ``config``."""
    if dict(config) == dict(record.edit.config):
        return record
    if hasattr(record, "model_copy"):
        return record.model_copy(update={"edit": record.edit.model_copy(
            update={"config": dict(config)})})
    view = SimpleNamespace(**vars(record))
    view.edit = SimpleNamespace(**{**vars(record.edit), "config": dict(config)})
    return view


class _Env:
    """default_facts reads attributes; the target is a mapping."""

    def __init__(self, target: Mapping[str, Any]) -> None:
        self.__dict__.update(target)
        self.gpu_name = str(target.get("gpu_name") or "target")


def _measured_shapes(rows: Sequence[ExperienceRow], space: Space) -> list[str]:
    """The op's most measured shape labels that the space can launch."""
    probe = space.configs[0]
    counts = Counter(r.shape for r in rows)
    usable = [s for s, _ in counts.most_common() if space.launch_of_config(probe, s) is not None]
    return usable[:SHAPES] or [s for s, _ in counts.most_common(SHAPES)]


def _item(rank: int, ranked: Any, found: Sequence[Any],
          bounds: tuple[float, float] | None = None) -> RankedItem:
    """``found``: the same configuration on the most similar GPUs, shape by shape; the
    evidence lines name the most similar GPU's result on each shape. ``bounds``: the
    prediction's calibrated interval (CostModel.interval)."""
    neighbours = [RankedNeighbour(gpu=n.gpu, similarity=round(n.similarity, 4),
                                  rel_time=_round(n.rel_time), rank_pct=round(n.rank_pct, 4),
                                  shape=n.shape) for n in found]
    closest: dict[str, RankedNeighbour] = {}
    for n in neighbours:
        if n.shape not in closest or n.similarity > closest[n.shape].similarity:
            closest[n.shape] = n
    evidence = [f"on {n.gpu} (similarity {n.similarity:.2f}), {n.shape}: "
                + (time_vs_best(n.rel_time, "its best there") if n.rel_time is not None
                   else "failed")
                + f", rank {100 * n.rank_pct:.0f}% of its configurations"
                for n in closest.values()]
    if ranked.measured_rel_time is not None:
        evidence.insert(0, "measured on the target: "
                           + time_vs_best(ranked.measured_rel_time, "its best so far"))
    if not evidence:
        evidence = ["not measured on any GPU: from the transferable features alone"]
    return RankedItem(rank=rank, config=dict(ranked.config),
                      predicted_rel_time=_round(ranked.predicted_rel_time),
                      predicted_rel_low=_round(bounds[0]) if bounds else None,
                      predicted_rel_high=_round(bounds[1]) if bounds else None,
                      measured_rel_time=_round(ranked.measured_rel_time),
                      evidence=evidence, neighbours=neighbours)


def _round(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, 4)
