"""Build the experience record of one round, evaluated or not.

Rounds that never reach the sandbox (an unusable reply, a comment-only edit, a repeat)
are experiences too: the record says what was proposed and why it did not count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelkb.kb.record import Edit, Environment, ExperienceRecord, Feedback, Provenance, TaskInfo
from kernelkb.kernels.base import Task
from kernelkb.kernels.config import header_constants
from kernelkb.kernels.shared.hashing import source_hash
from kernelkb.kernels.shared.vocabulary import RoundKind, Verdict
from kernelkb.optimizer.agents.base import Proposal


@dataclass(frozen=True)
class RunInfo:
    """What every record of one run shares."""

    run_id: str
    task: Task
    dtype: str
    shape_set: str
    env: Environment
    agent: str
    model: str | None
    command: str | None
    regime: str | None = None  # the shape regime this run's rounds tune (Task.regimes)


def task_config(task: Task, source: str) -> dict[str, Any]:
    header = header_constants(source)
    return {p.name: header[p.name] for p in task.params if p.name in header}


def unevaluated_feedback(kind: str, message: str) -> Feedback:
    """Feedback for a round the sandbox never saw: it stopped before the syntax stage."""
    return Feedback(stage="syntax", error_kind=kind, error_message=message, text=message)


def build_record(info: RunInfo, *, iteration: int, round_kind: RoundKind, proposal: Proposal,
                 parent_source: str | None, diff: str, feedback: Feedback | dict[str, Any],
                 verdict: Verdict) -> ExperienceRecord:
    child = proposal.source if proposal.source is not None else proposal.raw or proposal.summary
    return ExperienceRecord(
        run_id=info.run_id,
        iteration=iteration,
        task=TaskInfo(op_type=info.task.op_type, task_id=info.task.name, dtype=info.dtype,
                      shape_set=info.shape_set, regime=info.regime),
        env=info.env,
        edit=Edit(
            summary=proposal.summary[:1000],
            rationale=proposal.rationale[:1000] or None,
            categories=list(proposal.categories),
            diff=diff,
            config=task_config(info.task, proposal.source or ""),
            parent_hash=source_hash(parent_source) if parent_source is not None else None,
            child_hash=source_hash(child),
            child_source=proposal.source,
        ),
        feedback=feedback if isinstance(feedback, Feedback) else Feedback(**feedback),
        verdict=verdict,
        provenance=Provenance(agent=info.agent, model=info.model, round_kind=round_kind,
                              command=info.command),
    )
