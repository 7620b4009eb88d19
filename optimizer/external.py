"""Rounds proposed from outside the loop: a coding agent (through MCP) brings each candidate.

The built-in loop owns its agent; here the caller is the agent. Each call is one round of
``optimizer.loop``'s shape, judged and written back with the same pieces: the diff check,
the sandbox, ``judge`` with the noise threshold, ``build_record`` and ``Writeback`` (the
store, else the run's journal). A run's first call evaluates and writes its starting
kernel as the baseline round, as ``Loop`` does, so every candidate has a parent result to
be judged against.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelkb.kb.record import Environment, ExperienceRecord
from kernelkb.kernels.base import Task
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.shared.errors import UserError
from kernelkb.kernels.shared.hashing import source_hash
from kernelkb.kernels.shared.vocabulary import Verdict
from kernelkb.optimizer.agents.base import Proposal
from kernelkb.optimizer.diffcheck import check
from kernelkb.optimizer.experience import RunInfo, build_record, unevaluated_feedback
from kernelkb.optimizer.verdict import judge, noise_threshold
from kernelkb.optimizer.writeback import Journal, Writeback

Evaluator = Callable[..., Any]  # optimizer.sandbox.evaluate's signature


class BadCandidate(UserError):
    """The call itself is wrong (unknown task, not a Python module, ...): nothing is run
    or written, the caller is told why."""


@dataclass(frozen=True)
class Candidate:
    """One proposed kernel and what the agent says about it."""

    source: str
    summary: str
    categories: tuple[str, ...] = ("other",)
    rationale: str = ""
    claimed_gain: bool = False
    parent_source: str | None = None  # None: the run's best kernel so far


@dataclass(frozen=True)
class RoundResult:
    run_id: str
    iteration: int
    verdict: str
    written: str  # "stored" or "journaled"
    record: ExperienceRecord
    feedback_text: str
    feedback: dict[str, Any]
    ok: bool
    baseline_record_id: str | None = None  # the run's starting kernel, when this call wrote it

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "iteration": self.iteration, "verdict": self.verdict,
                "ok": self.ok, "record_id": self.record.id, "written": self.written,
                "baseline_record_id": self.baseline_record_id,
                "feedback_text": self.feedback_text, "feedback": self.feedback}


def check_module(source: str) -> None:
    """A candidate must be a Python module defining ``run``; BadCandidate says where not."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise BadCandidate(f"the source is not valid Python: line {err.lineno}, column "
                           f"{err.offset}: {err.msg}") from None
    names = {node.name for node in tree.body
             if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    if "run" not in names:
        raise BadCandidate("the source defines no top-level run(...) function: a candidate "
                           "is a whole module whose run() has the task's signature")


@dataclass
class ExternalRun:
    """One run: its shared record fields, write-back and the results it has seen."""

    info: RunInfo
    shapes: str | list[tuple[int, ...]]
    writeback: Writeback
    baseline: Any = None  # optimizer.sandbox.Baseline on a GPU, else None
    iteration: int = 0
    best_source: str | None = None
    results: dict[str, Any] = field(default_factory=dict)  # source hash -> EvalResult
    tried: dict[str, int] = field(default_factory=dict)  # source hash -> iteration
    lock: threading.Lock = field(default_factory=threading.Lock)


class ExternalRuns:
    """The runs of one server process, keyed by run id."""

    def __init__(self, sink: Any, journal_dir: Path, *, evaluator: Evaluator | None = None,
                 env: Environment | None = None, timeout_s: float = 60.0,
                 seeds: int = 3) -> None:
        from kernelkb.optimizer import sandbox

        self.sink, self.journal_dir = sink, Path(journal_dir)
        self.evaluate_fn = evaluator or sandbox.evaluate
        self._env = env
        self.timeout_s, self.seeds = timeout_s, seeds
        self.runs: dict[str, ExternalRun] = {}
        self.current: dict[tuple[str, str, str], str] = {}  # (task, dtype, shapes) -> run id
        self._lock = threading.Lock()

    @property
    def env(self) -> Environment:
        """This machine's fingerprint, detected on the first evaluation."""
        if self._env is None:
            from kernelkb.optimizer import sandbox

            self._env = Environment(**sandbox.detect_environment())
        return self._env

    # -- runs -------------------------------------------------------------------------
    def run_for(self, task_name: str, dtype: str, shapes: str | list[tuple[int, ...]],
                run_id: str | None, agent: str, model: str | None) -> ExternalRun:
        """The named run, or this process's current run for the task, dtype and shapes,
        or a new one."""
        task = _task(task_name)
        if dtype not in task.tolerances or dtype not in DTYPES:
            raise BadCandidate(f"task {task.name}: dtype {dtype!r} not in "
                               f"{sorted(task.tolerances)}")
        key = (task.name, dtype, repr(shapes))
        with self._lock:
            if run_id is not None:
                run = self.runs.get(run_id)
                if run is None:
                    raise BadCandidate(f"no run {run_id!r} in this server; leave run_id out "
                                       "to start one")
                if run.info.task.name != task.name or run.info.dtype != dtype:
                    raise BadCandidate(f"run {run_id} is for {run.info.task.name} in "
                                       f"{run.info.dtype}, not {task.name} in {dtype}")
                return run
            if key in self.current:
                return self.runs[self.current[key]]
            run = self._new_run(task, dtype, shapes, agent, model)
            self.runs[run.info.run_id] = run
            self.current[key] = run.info.run_id
            return run

    def _new_run(self, task: Task, dtype: str, shapes: str | list[tuple[int, ...]],
                 agent: str, model: str | None) -> ExternalRun:
        from kernelkb.optimizer import sandbox
        from kernelkb.optimizer.session import new_run_id

        try:
            shape_set, _ = sandbox.resolve_shapes(task, shapes, self.env.arch != "cpu")
        except ValueError as err:
            raise BadCandidate(str(err)) from None
        if shape_set == "custom":
            assert not isinstance(shapes, str)  # "custom": the shapes were given as a list
            shape_set = ";".join(task.shape_label(s) for s in shapes)
        run_id = new_run_id(task.name)
        info = RunInfo(run_id, task, dtype, shape_set, self.env, agent, model,
                       "kernelkb mcp: evaluate_kernel")
        journal = Journal(self.journal_dir / f"{run_id}.jsonl")
        baseline = sandbox.measure_baseline(task.name, dtype, shapes) \
            if self.env.arch != "cpu" else None
        return ExternalRun(info, shapes, Writeback(self.sink, journal), baseline)

    # -- one round --------------------------------------------------------------------
    def evaluate(self, run: ExternalRun, candidate: Candidate) -> RoundResult:
        """Judge one candidate against its parent and write the record back."""
        check_module(candidate.source)
        try:
            proposal = Proposal(source=candidate.source, summary=candidate.summary,
                                categories=candidate.categories,
                                claimed_gain=candidate.claimed_gain,
                                rationale=candidate.rationale)
        except ValueError as err:  # an unknown category
            raise BadCandidate(str(err)) from None
        with run.lock:
            baseline_id = None
            if run.best_source is None:
                start = candidate.parent_source or run.info.task.template
                first = self._baseline_round(run, start)
                if candidate.source == start:  # feedback on the starting kernel itself
                    return first
                baseline_id = first.record.id
            parent = candidate.parent_source or run.best_source
            assert parent is not None
            run.iteration += 1
            diff = check(parent, candidate.source)
            seen = run.tried.get(source_hash(candidate.source))
            if not diff.valid or seen is not None:
                kind = "no_change" if not diff.valid else "repeat"
                message = (f"INVALID: {diff.reason}. Make a real change." if not diff.valid
                           else f"INVALID: identical to the candidate of round {seen}, "
                                "which was already measured")
                record = build_record(run.info, iteration=run.iteration, round_kind="exploit",
                                      proposal=proposal, parent_source=parent, diff=diff.diff,
                                      feedback=unevaluated_feedback(kind, message),
                                      verdict=Verdict.invalid)
                written = run.writeback.write(record)
                return RoundResult(run.info.run_id, run.iteration, Verdict.invalid.value,
                                   written, record, message, record.feedback.model_dump(),
                                   False, baseline_id)
            parent_result = self._parent_result(run, parent)
            run.tried[source_hash(candidate.source)] = run.iteration
            result = self._evaluate(run, candidate.source, parent_result, parent)
            noise = noise_threshold(result, parent_result)
            verdict = judge(result, parent_result, claimed_gain=candidate.claimed_gain,
                            noise=noise)
            record = build_record(run.info, iteration=run.iteration, round_kind="exploit",
                                  proposal=proposal, parent_source=parent, diff=diff.diff,
                                  feedback=result.feedback_dict(), verdict=verdict)
            written = run.writeback.write(record)
            if verdict is Verdict.improved and parent == run.best_source:
                run.best_source = candidate.source
            return RoundResult(run.info.run_id, run.iteration, verdict.value, written, record,
                               result.text, result.feedback_dict(), bool(result.ok),
                               baseline_id)

    def _baseline_round(self, run: ExternalRun, source: str) -> RoundResult:
        """Evaluate and write the run's starting kernel (iteration 0), as Loop does."""
        check_module(source)
        result = self._evaluate(run, source, None, None)
        if not result.ok:
            raise BadCandidate(f"the starting kernel did not pass ({result.error_kind}), so "
                               f"there is nothing to judge against: {result.text}")
        proposal = Proposal(source=source, summary=f"starting kernel of {run.info.task.name}",
                            categories=("baseline",))
        record = build_record(run.info, iteration=0, round_kind="baseline", proposal=proposal,
                              parent_source=None, diff="", feedback=result.feedback_dict(),
                              verdict=Verdict.neutral)
        written = run.writeback.write(record)
        run.best_source = source
        run.tried[source_hash(source)] = 0
        return RoundResult(run.info.run_id, 0, Verdict.neutral.value, written, record,
                           result.text, result.feedback_dict(), True, record.id)

    def _parent_result(self, run: ExternalRun, parent: str) -> Any:
        """The parent's evaluation: from this run, else evaluated now (not written: it is
        no edit of this run, only the reference the candidate is judged against)."""
        key = source_hash(parent)
        if key not in run.results:
            check_module(parent)
            self._evaluate(run, parent, None, None)
        return run.results[key]

    def _evaluate(self, run: ExternalRun, source: str, parent_result: Any,
                  parent_source: str | None) -> Any:
        result = self.evaluate_fn(run.info.task.name, source, dtype=run.info.dtype,
                                  shapes=run.shapes, parent=parent_result,
                                  baseline=run.baseline, seeds=self.seeds,
                                  timeout_s=self.timeout_s, parent_source=parent_source)
        run.results[source_hash(source)] = result
        return result


def _task(name: str) -> Task:
    try:
        return get_task(name)
    except KeyError as err:
        raise BadCandidate(str(err.args[0]) if err.args else str(err)) from None
