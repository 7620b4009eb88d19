"""One answer to "what do I try first on this GPU?", and time ratios said one way.

Why: ``bootstrap`` printed the learned ranker's first configuration and, below it, the
best configuration measured on the nearest GPU as item 1: two first answers. The rule
here is the optimizer's (optimizer/recall.py ``known``): where the target has measured
nothing of the op, the ranker's first configuration leads; where it has, the best
measured configuration does. Measured configurations of the op say where the ranker
puts them, so the two lists read as one.

And a ratio of times read as a speedup: "predicted 1.20x the best" for a configuration
predicted 20% slower. ``time_vs_best`` says it as extra time.
"""

from __future__ import annotations

from collections.abc import Mapping

from kernelkb.retrieval.schemas import BootstrapPlan, PlanItem


def time_vs_best(rel: float | None, best: str = "the best") -> str:
    """A time over the best time as extra time: 1.20 -> "+20% time vs the best"; 1.0 ->
    "as fast as the best"; None -> "time unknown"."""
    if rel is None:
        return "time unknown"
    percent = round(100 * (rel - 1.0))
    if percent == 0:
        return f"as fast as {best}"
    return f"{percent:+d}% time vs {best}"


def settle_first(plan: BootstrapPlan) -> None:
    """Fill ``plan.try_first`` and note, on each measured configuration of the predicted
    op, its rank in the ranker's order (see the module doc)."""
    pred = plan.prediction
    if pred is None or not pred.items:
        plan.try_first = plan.items[0] if plan.items else None
        return
    ranks = {_key(item.config): item.rank for item in pred.items}
    task = pred.task_id or pred.op_type
    for item in plan.items:
        if item.kind != "config" or item.task_id not in (task, None) or not item.config:
            continue
        rank = ranks.get(_key(item.config))
        item.evidence += (f"; the ranker's #{rank} on {pred.target_gpu}" if rank else
                          f"; not in the ranker's first {len(pred.items)} on "
                          f"{pred.target_gpu}")
    if pred.target_measurements:
        measured = [i for i in plan.items if i.kind == "config" and i.task_id == task]
        plan.try_first = measured[0] if measured else (plan.items[0] if plan.items else None)
        return
    top = pred.items[0]
    plan.try_first = PlanItem(
        kind="predicted", category="other", config=dict(top.config),
        from_hardware="learned cost model",
        evidence=(f"the learned ranker's #1 for {task} on {pred.target_gpu}: predicted "
                  f"{time_vs_best(top.predicted_rel_time, 'the best per shape')}; a hint, "
                  f"not measured on {pred.target_gpu}"),
        example_ids=[], score=0.0, task_id=pred.task_id)


def _key(config: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, repr(v)) for k, v in config.items()))
