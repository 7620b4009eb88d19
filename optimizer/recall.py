"""Ask the knowledge base what is known before a round (same op / hardware, then transfer)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernelkb.kb.record import Environment, ExperienceRecord
from kernelkb.kernels.base import Task

if TYPE_CHECKING:
    from kernelkb.retrieval.protocol import Knowledge

log = logging.getLogger(__name__)


@dataclass
class Recalled:
    experiences: list[ExperienceRecord] = field(default_factory=list)
    few_shot: str = ""
    insights: list[Any] = field(default_factory=list)


def query_for(task: Task, dtype: str, env: Environment, *, source: str | None = None,
              feedback: str | None = None, k: int = 8, regime: str | None = None) -> Any:
    """The retrieval query of a round: the task's op, its declared related ops (the one
    source of truth: ``Task.related_ops``), the hardware and Triton version it runs on,
    and the shape regime the round tunes (the op's own experiences from other regimes
    are left out: what wins on long rows is no evidence for short ones)."""
    from kernelkb.retrieval.query import RetrievalQuery

    return RetrievalQuery(op_type=task.op_type, task_id=task.name, dtype=dtype,
                          gpu_name=env.gpu_name, arch=env.arch,
                          triton_version=env.triton_version, kernel_source=source,
                          feedback_text=feedback or None, k=k,
                          related_ops=list(task.related_ops), check_names=False,
                          regime=regime)


def recall(knowledge: Knowledge, task: Task, dtype: str, env: Environment, *, source: str,
           feedback: str, k: int = 8, regime: str | None = None) -> Recalled:
    """Hits and warnings as records, the few-shot block, and the op's category insights.

    A knowledge service that fails here costs the round its few-shot examples, not the run.
    """
    query = query_for(task, dtype, env, source=source, feedback=feedback, k=k, regime=regime)
    try:
        result = knowledge.retrieve(query)
        report = knowledge.insights(op_type=task.op_type, arch=env.arch,
                                    current_triton=env.triton_version,
                                    **({"regime": regime} if regime else {}))
    except Exception as err:  # noqa: BLE001 - retrieval is advisory; the loop goes on
        log.warning("retrieval failed (%s: %s); continuing without experiences",
                    type(err).__name__, err)
        return Recalled()
    records = [h.record for h in (*result.hits, *result.warnings)]
    return Recalled(records, result.prompt_block, list(report.categories))


# same architecture and alike in SMs and bandwidth (retrieval.hardware.gpu_similarity;
# its FAR cut)
MIN_SIMILARITY = 0.85
MAX_KNOWN = 2  # known configurations offered to an agent per run, best first
MAX_PREDICTED = 3  # predicted configurations the offline agent may adopt, in ranker order
RANKED = 1000  # how much of the ranker's order a run keeps (the tuner walks it)


@dataclass
class Known:
    """What a run starts from. ``configs``: whole configurations an agent may adopt, best
    first: measured ones (this GPU's, or an alike GPU's), or, when this GPU has no
    measurement of the task, the learned ranker's first (``PlanItem`` of kind
    "predicted"). ``predicted``: the ranker's order (``RankedItem``), only then."""

    configs: list[Any] = field(default_factory=list)
    predicted: list[Any] = field(default_factory=list)


def known(knowledge: Knowledge, task: Task, dtype: str, env: Environment,
          shapes: list[str] | None = None) -> Known:
    """The best measured configurations of this task on this GPU, or on the most alike
    known GPUs: an agent can adopt one whole instead of rediscovering it one edit at a
    time (on the H200, attention's best is five edits from the naive kernel). ``shapes``
    (the labels a regime is tuned on): the best is the fastest measured on them, so a
    configuration that won on long rows is not adopted for short ones. Where this
    GPU has measured nothing of the task, the learned cost model's order instead
    (retrieval/prediction.py), labelled as predicted. Nothing on a CPU, where no
    configuration was ever timed. Asked once per run and regime: the plan does not change
    with the round."""
    if env.arch == "cpu":
        return Known()
    from kernelkb.optimizer.spaces import task_space

    try:
        plan = knowledge.bootstrap(env.model_dump(mode="json"), op_type=task.op_type,
                                   include_own=True, space=task_space(task, dtype),
                                   limit=RANKED, shapes=shapes)
    except Exception as err:  # noqa: BLE001 - advisory, like the rest of recall
        log.warning("no known configurations (%s: %s)", type(err).__name__, err)
        return Known()
    pred = plan.prediction
    if pred is not None and pred.task_id == task.name and not pred.target_measurements \
            and pred.items:
        return Known([predicted_item(task, dtype, item, pred.target_gpu)
                      for item in pred.items[:MAX_PREDICTED]], list(pred.items))
    # a configuration stored before a variant existed ran its first value: completed
    # (Task.complete), it can be adopted whole
    own = [item.model_copy(update={"config": task.complete(item.config)})
           for item in plan.items
           if item.kind == "config" and item.task_id == task.name
           and item.dtype == dtype and task.complete(item.config) is not None
           and (item.similarity or 0.0) >= MIN_SIMILARITY][:MAX_KNOWN]
    return Known(own or related(knowledge, task, dtype, env, shapes))


def related(knowledge: Knowledge, task: Task, dtype: str, env: Environment,
            shapes: list[str] | None = None) -> list[Any]:
    """Where nothing of this task was measured on this GPU: the best configurations of its
    declared related ops here (or on an alike GPU), cut to the knobs the two share, with
    the task's defaults for the rest (on the H200 a LayerNorm written with RMSNorm's knob
    names wins with RMSNorm's whole-row, 4-warp configuration). Only configurations whose
    knobs are mostly this task's carry over; they are labelled as measured on the other op,
    and the run measures them like any proposal."""
    params = {p.name: p for p in task.params}
    out: list[Any] = []
    for op in task.related_ops:
        try:
            plan = knowledge.bootstrap(env.model_dump(mode="json"), op_type=op,
                                       include_own=True, limit=MAX_KNOWN, shapes=shapes)
        except Exception as err:  # noqa: BLE001 - advisory, like the rest of recall
            log.warning("no related configurations from %s (%s: %s)", op,
                        type(err).__name__, err)
            continue
        for item in plan.items:
            if item.kind != "config" or item.dtype != dtype or item.task_id == task.name \
                    or (item.similarity or 0.0) < MIN_SIMILARITY:
                continue
            shared = {k: v for k, v in item.config.items()
                      if k in params and v in params[k].values}
            if not shared or 2 * len(shared) < len(item.config):
                continue  # mostly knobs this task does not have: nothing whole carries
            config = {**task.default_config, **shared}
            if any(config == o.config for o in out):
                continue
            foreign = sorted(set(item.config) - set(shared))
            note = f" (not carried: {', '.join(foreign)})" if foreign else ""
            out.append(item.model_copy(update={
                "kind": "related", "config": config, "task_id": task.name,
                "evidence": f"{op}'s {item.evidence}; the knobs {task.name} shares{note}"}))
            if len(out) >= MAX_KNOWN:
                return out
    return out


def known_configs(knowledge: Knowledge, task: Task, dtype: str, env: Environment,
                  shapes: list[str] | None = None) -> list[Any]:
    return known(knowledge, task, dtype, env, shapes).configs


def predicted_item(task: Task, dtype: str, item: Any, gpu: str) -> Any:
    """A ranked configuration as a plan item an agent can adopt, saying it is predicted."""
    from kernelkb.retrieval.schemas import PlanItem

    default = task.default_config
    changed = sorted({p.category for p in task.params
                      if item.config.get(p.name) != default[p.name]})
    from kernelkb.retrieval.first_try import time_vs_best

    rel = time_vs_best(item.predicted_rel_time, "the best per shape")
    why = f"; {item.evidence[0]}" if item.evidence else ""
    return PlanItem(kind="predicted", category=(changed or ["other"])[0],
                    config=dict(item.config), from_hardware="learned cost model",
                    evidence=f"predicted rank {item.rank} on {gpu}, {rel}, by the "
                             f"learned cost model: a hint, not measured on {gpu}{why}",
                    example_ids=[], score=-(item.predicted_rel_time or item.rank),
                    task_id=task.name, dtype=dtype)
