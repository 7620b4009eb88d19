"""Ask the knowledge base what is known before a round (same op / hardware, then transfer)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from kb.record import Environment, ExperienceRecord
from kernels.base import Task

log = logging.getLogger(__name__)


@dataclass
class Recalled:
    experiences: list[ExperienceRecord] = field(default_factory=list)
    few_shot: str = ""
    insights: list[Any] = field(default_factory=list)


def recall(knowledge: Any, task: Task, dtype: str, env: Environment, *, source: str,
           feedback: str, k: int = 8) -> Recalled:
    """Hits and warnings as records, the few-shot block, and the op's category insights.

    A knowledge service that fails here costs the round its few-shot examples, not the run.
    """
    from retrieval.query import RetrievalQuery

    query = RetrievalQuery(op_type=task.op_type, task_id=task.name, dtype=dtype,
                           gpu_name=env.gpu_name, arch=env.arch,
                           triton_version=env.triton_version, kernel_source=source,
                           feedback_text=feedback or None, k=k)
    try:
        result = knowledge.retrieve(query)
        report = knowledge.insights(op_type=task.op_type, arch=env.arch)
    except Exception as err:  # noqa: BLE001 - retrieval is advisory; the loop goes on
        log.warning("retrieval failed (%s: %s); continuing without experiences",
                    type(err).__name__, err)
        return Recalled()
    records = [h.record for h in (*result.hits, *result.warnings)]
    return Recalled(records, result.prompt_block, list(report.categories))
