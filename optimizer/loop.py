"""The optimization loop of DESIGN.md: compose agent, diff check, sandbox, policy, write-back.

baseline round -> [recall -> propose ONE change -> diff check -> evaluate -> verdict ->
write back -> policy] until a stop condition -> full shape sweep of the best kernel.
Each piece lives in its own module; this one only wires them and keeps the run's state.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelkb.kb.record import Environment, ExperienceRecord
from kernelkb.kernels.base import Task
from kernelkb.kernels.config import header_constants
from kernelkb.kernels.shared.hashing import source_hash
from kernelkb.kernels.shared.vocabulary import ProposalKind, RoundKind, Verdict
from kernelkb.optimizer.agents.base import (
    Agent,
    AgentContext,
    AgentUnavailable,
    Proposal,
    RoundNote,
    SearchExhausted,
    propose_batch,
)
from kernelkb.optimizer.diffcheck import DiffCheck, check
from kernelkb.optimizer.experience import RunInfo, build_record, unevaluated_feedback
from kernelkb.optimizer.policy import Policy, StopReason
from kernelkb.optimizer.recall import Known, Recalled, known, recall
from kernelkb.optimizer.run_file import RunFile
from kernelkb.optimizer.sandbox.evaluator import resolve_shapes, sweep_shape_set, work_timeout_s
from kernelkb.optimizer.sandbox.result import Baseline, EvalResult
from kernelkb.optimizer.verdict import judge, noise_threshold
from kernelkb.optimizer.writeback import Writeback

if TYPE_CHECKING:
    from kernelkb.optimizer.eval_pool import EvalPool
    from kernelkb.retrieval.protocol import Knowledge

log = logging.getLogger(__name__)
progress = logging.getLogger("kernelkb.progress")  # the lines a user of the command reads
Evaluator = Callable[..., EvalResult]  # optimizer.sandbox.evaluate's signature


@dataclass(frozen=True)
class LoopOptions:
    dtype: str = "float16"
    shapes: str | list[tuple[int, ...]] = "auto"  # shapes evaluated each round
    # the final sweep; "auto": every shape on a GPU, the cpu + edge shapes on a CPU
    sweep_shapes: str | list[tuple[int, ...]] = "auto"
    seeds: int = 3
    timeout_s: float = 60.0
    retrieval: bool = True
    peers: bool = True  # on a GPU, time eager / torch.compile / Liger / ... for the report
    regimes: tuple[str, ...] = ()  # tune only these regimes of the task (empty: every one)


@dataclass
class RoundOutcome:
    """One round as the report and the live progress line see it."""

    iteration: int
    kind: str
    summary: str
    verdict: str
    time_ms: float | None
    best_ms: float | None
    improved: bool
    message: str = ""
    rationale: str = ""
    record_id: str | None = None


@dataclass
class RunResult:
    run_id: str
    task: Task
    dtype: str
    env: Environment
    stop_reason: StopReason
    rounds: list[RoundOutcome]
    records: list[ExperienceRecord]
    start_source: str
    best_source: str
    best_result: EvalResult
    start_sweep: EvalResult | None = None  # the starting kernel over the sweep shapes
    best_sweep: EvalResult | None = None  # the best kernel over the sweep, parent = start
    regressions: dict[str, float] = field(default_factory=dict)  # shape -> slowdown share
    peer_timings: Any = None  # optimizer.peers.PeerTimes of the run's end, on a GPU
    retrieved_ids: list[str] = field(default_factory=list)
    report_path: Path | None = None
    export_path: Path | None = None
    journal_path: Path | None = None
    failure: str | None = None  # why the run stopped early when the agent's endpoint failed
    table_path: Path | None = None  # the exported kernel's dispatch table
    spent_s: float = 0.0  # evaluation seconds the rounds took (the policy's budget count)
    regime: str | None = None  # the regime this result tuned (one of by_regime's keys)
    # a run over several regimes: one result per regime (each with its own rounds, best
    # kernel and sweep); this result then holds all rounds and records together
    by_regime: dict[str, RunResult] = field(default_factory=dict)
    untuned: dict[str, str] = field(default_factory=dict)  # regime -> why it was not tuned


@dataclass(frozen=True)
class _Judged:
    verdict: Verdict
    noise: float
    score: float | None  # the policy's score (None: not a timed, trusted figure)


@dataclass
class _State:
    best_source: str
    best_result: EvalResult
    context_feedback: str = ""
    history: list[RoundNote] = field(default_factory=list)
    reminders: list[str] = field(default_factory=list)
    tried: dict[str, int] = field(default_factory=dict)  # source hash -> round


class StartFailed(RuntimeError):
    """The task's starting kernel failed its first check; nothing to optimize from."""

    def __init__(self, task: str, kind: str | None, message: str | None) -> None:
        first = (message or "").strip().splitlines()[:1]
        what = "ran out of time" if kind == "timeout" else "is not correct"
        hint = (" (a busy or slow CPU: raise --timeout-s, or choose smaller shapes with "
                "--shapes cpu)") if kind == "timeout" else ""
        super().__init__(f"the starting kernel of {task} {what}: {kind}: "
                         f"{first[0] if first else ''}{hint}")


FIRST_SETTLE_S = 15.0  # the run's first evaluation waits this long at most for a steady GPU


class Loop:
    def __init__(self, task: Task, agent: Agent, *, info: RunInfo, evaluator: Evaluator,
                 writeback: Writeback, policy: Policy, knowledge: Knowledge | None = None,
                 options: LoopOptions | None = None, baseline: Baseline | None = None,
                 on_round: Callable[[RoundOutcome], None] | None = None,
                 live: RunFile | None = None, first_iteration: int = 0,
                 start_note: str = "",
                 on_evaluating: Callable[[int, str, str | None], None] | None = None,
                 pool: EvalPool | None = None) -> None:
        self.task, self.agent, self.info, self.evaluate = task, agent, info, evaluator
        # several GPUs (optimizer/eval_pool.py): a round measures a candidate on each
        self.pool = pool
        # a resumed run (optimizer/resume.py) numbers on from its last journaled round and
        # says which round's kernel it starts from
        self.first_iteration, self.start_note = first_iteration, start_note
        self.on_evaluating = on_evaluating  # (round, kind, regime): a spinner says what runs
        self.live = live  # the run folder's run.json (optimizer/run_file.py), or None
        self.writeback, self.policy, self.knowledge = writeback, policy, knowledge
        self.options = options or LoopOptions(dtype=info.dtype)
        self.baseline, self.on_round = baseline, on_round
        self.records: list[ExperienceRecord] = []
        self.rounds: list[RoundOutcome] = []
        self.retrieved_ids: list[str] = []
        self.known: Known | None = None  # asked once, on the first recall

    # -- the run ----------------------------------------------------------------------
    def run(self, start_source: str | None = None) -> RunResult:
        start = start_source or self.task.template
        state = self._baseline_round(start)
        recalled = self._recall(state)
        iteration = self.first_iteration
        interrupted = False
        failure: str | None = None
        try:
            while self.policy.stop_reason() is None:
                iteration += 1
                kind = self.agent.fixed_round_kind or self.policy.round_kind(iteration)
                context = self._context(state, iteration, kind, recalled)
                count = min(self.pool.slots if self.pool else 1,
                            self.policy.config.max_iters - self.policy.rounds)
                try:
                    proposals = propose_batch(self.agent, context, count) if count > 1 \
                        else [self.agent.propose(context)]
                except SearchExhausted as err:
                    log.info("agent has nothing left: %s", err)
                    self.policy.exhausted = True
                    break
                if len(proposals) > 1:
                    improved = self._batch_round(state, iteration, kind, proposals)
                    iteration += len(proposals) - 1
                else:
                    improved = self._round(state, iteration, kind, proposals[0])
                if improved:
                    recalled = self._recall(state)
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM from a time limit (optimizer.command)
            log.warning("interrupted in round %d: keeping the rounds done, no sweep", iteration)
            interrupted = True
        except AgentUnavailable as err:  # the endpoint failed: that round is no experience
            log.info("stopping: the agent failed (the result's failure says why)")
            failure = str(err)
            interrupted = True
        reason = StopReason.interrupt if interrupted else \
            self.policy.stop_reason() or StopReason.exhausted
        if failure:
            reason = StopReason.agent_unavailable
        log.info("stopped after %d rounds: %s", iteration, reason.value)
        result = RunResult(self.info.run_id, self.task, self.info.dtype, self.info.env, reason,
                           self.rounds, self.records, start, state.best_source,
                           state.best_result, retrieved_ids=self.retrieved_ids,
                           failure=failure)
        if not interrupted:
            try:
                self._sweep(result, iteration + 1)
            except KeyboardInterrupt:
                log.warning("interrupted during the final sweep: the report has no sweep")
                result.stop_reason = StopReason.interrupt
        return result

    def _job(self, parent: EvalResult | None, shapes: Any = None,
             parent_source: str | None = None,
             first: bool = False) -> dict[str, Any]:
        """The evaluator's keyword arguments for one candidate."""
        shapes = shapes or self.options.shapes
        extra = {"settle_s": FIRST_SETTLE_S} if first else {}
        return dict(dtype=self.options.dtype, shapes=shapes, parent=parent,
                    baseline=self.baseline, seeds=self.options.seeds,
                    timeout_s=self._timeout_s(shapes), parent_source=parent_source, **extra)

    def _evaluate(self, source: str, parent: EvalResult | None, shapes: Any = None,
                  parent_source: str | None = None, first: bool = False
                  ) -> tuple[EvalResult, float]:
        began = time.monotonic()
        result = self.evaluate(self.task.name, source,
                               **self._job(parent, shapes, parent_source, first))
        spent = result.wall_s or (time.monotonic() - began)
        steps = json.loads((getattr(result, "artifacts", None) or {}).get("wall_s") or "{}")
        slowest = sorted(steps.items(), key=lambda kv: -kv[1])[:3]
        log.info("evaluated in %.1f s; slowest steps: %s", spent,
                 ", ".join(f"{k} {v:.1f} s" for k, v in slowest) or "-")
        return result, spent

    def _timeout_s(self, shapes: Any) -> float:
        """The candidate's wall-clock limit: the options' limit, raised to what the work
        needs (shapes x seeds x timing, work_timeout_s). Never cut to the budget's rest: a
        final sweep cut to 20 s once timed out on a correct kernel (on the H200 one
        whole-row 1-warp softmax took 244 s, which the work estimate still stops)."""
        on_gpu = self.info.env.arch != "cpu"
        count = len(resolve_shapes(self.task, shapes, on_gpu)[1])
        return max(self.options.timeout_s,
                   work_timeout_s(count, self.options.seeds, on_gpu=on_gpu))

    def _evaluating(self, iteration: int, kind: str, summary: str,
                    slots: list[dict[str, Any]] | None = None) -> None:
        if self.live is not None:
            self.live.evaluating(iteration, kind, summary, self.info.regime, slots)
        if self.on_evaluating is not None:
            self.on_evaluating(iteration, kind, self.info.regime)

    def _baseline_round(self, source: str) -> _State:
        first = self.first_iteration
        summary = self.start_note or f"starting kernel of {self.task.name}"
        self._evaluating(first, "baseline", summary)
        result, spent = self._evaluate(source, None, first=True)
        if not result.ok:
            raise StartFailed(self.task.name, result.error_kind, result.error_message)
        proposal = Proposal(source=source, summary=summary, categories=("baseline",))
        self._write(first, "baseline", proposal, None, "", result.feedback_dict(),
                    Verdict.neutral, result.time_ms, improved=False, message="")
        self.policy.start(_score(result), spent_s=spent)
        state = _State(best_source=source, best_result=result, context_feedback=result.text)
        state.tried[source_hash(source)] = first
        return state

    def _round(self, state: _State, iteration: int, kind: ProposalKind,
               proposal: Proposal) -> bool:
        diff = self._admit(state, iteration, kind, proposal)
        if diff is None:
            return False
        assert proposal.source is not None  # admitted
        self._evaluating(iteration, kind, proposal.summary)
        result, spent = self._evaluate(proposal.source, state.best_result,
                                       parent_source=state.best_source)
        judged = self._judged(state, proposal, result, self.policy.best_score)
        return self._conclude(state, iteration, kind, proposal, diff, result, spent, judged,
                              best_of_round=True)

    def _batch_round(self, state: _State, iteration: int, kind: ProposalKind,
                     proposals: list[Proposal]) -> bool:
        """Rounds ``iteration``.. at once, one candidate per slot of the pool, each timed
        against the same incumbent on the GPU that measures it. Every candidate is its
        own round and record (its verdict is against the incumbent); the fastest of
        those that improved becomes the new best."""
        assert self.pool is not None
        admitted = []
        for n, proposal in enumerate(proposals):
            diff = self._admit(state, iteration + n, kind, proposal)
            if diff is not None:
                admitted.append((iteration + n, proposal, diff))
        if not admitted:
            return False
        slots = [{"iteration": n, "summary": p.summary, "where": where} for (n, p, _), where
                 in zip(admitted, self.pool.slot_names(len(admitted)), strict=True)]
        for slot in slots:  # a line per GPU: what it measures now
            progress.info("%s: round %d: %s", slot["where"], slot["iteration"],
                          str(slot["summary"])[:90])
        self._evaluating(admitted[0][0], kind, f"{len(admitted)} candidates on "
                         f"{self.pool.where}: " + "; ".join(p.summary for _, p, _ in admitted),
                         slots=slots)
        began = time.monotonic()
        results = self.pool.evaluate_many([
            (self.task.name, str(p.source), self._job(state.best_result, None, state.best_source))
            for _, p, _ in admitted])
        wall = time.monotonic() - began
        best_before = self.policy.best_score
        judged = [self._judged(state, p, r, best_before) for (_, p, _), r
                  in zip(admitted, results, strict=True)]
        improved = [i for i, j in enumerate(judged) if j.verdict is Verdict.improved
                    and j.score is not None]
        winner = min(improved, key=lambda i: judged[i].score or 0.0) if improved else None
        log.info("%d candidates measured at once in %.1f s", len(admitted), wall)
        incumbent = (state.best_source, state.best_result)
        for i, ((n, proposal, diff), result) in enumerate(zip(admitted, results, strict=True)):
            state.best_source, state.best_result = incumbent  # every verdict is against it
            self._conclude(state, n, kind, proposal, diff, result,
                           result.wall_s or wall, judged[i], best_of_round=i == winner)
        if winner is not None:  # the loop above left the incumbent in place
            state.best_source, state.best_result = str(admitted[winner][1].source), \
                results[winner]
        return winner is not None

    def _admit(self, state: _State, iteration: int, kind: ProposalKind,
               proposal: Proposal) -> DiffCheck | None:
        """The proposal's diff against the best when it is to be measured; None when the
        round ends here (an unusable reply, no change, a repeat), written as such."""
        parent = state.best_source
        if proposal.source is None:
            message = f"round {iteration}: your reply was unusable ({proposal.error}); " \
                      "reply with one ```python block holding the whole module"
            self._not_evaluated(state, iteration, kind, proposal, "", Verdict.failed,
                                "unusable_reply", message)
            return None
        diff = check(parent, proposal.source)
        if not diff.valid:
            message = f"round {iteration} was INVALID: {diff.reason}. Make a real change."
            self._not_evaluated(state, iteration, kind, proposal, diff.diff,
                                Verdict.invalid, "no_change", message)
            return None
        seen = state.tried.get(source_hash(proposal.source))
        if seen is not None:
            message = f"round {iteration} was INVALID: identical to the candidate of round " \
                      f"{seen}, which was already measured"
            self._not_evaluated(state, iteration, kind, proposal, diff.diff,
                                Verdict.invalid, "repeat", message)
            return None
        state.tried[source_hash(proposal.source)] = iteration
        return diff

    def _judged(self, state: _State, proposal: Proposal, result: EvalResult,
                best_score: float | None) -> _Judged:
        """The verdict on ``result`` against the incumbent, and its score on the chain of
        comparisons that starts at ``best_score``."""
        noise = noise_threshold(result, state.best_result)
        verdict = judge(result, state.best_result, claimed_gain=proposal.claimed_gain,
                        noise=noise)
        score = _score(result, best_score) if verdict is not Verdict.invalid else None
        return _Judged(verdict, noise, score)

    def _conclude(self, state: _State, iteration: int, kind: ProposalKind,
                  proposal: Proposal, diff: DiffCheck, result: EvalResult, spent: float,
                  judged: _Judged,
                  *, best_of_round: bool) -> bool:
        """A measured round: the policy, the agent, the record and the run's memory."""
        parent = state.best_source
        verdict, noise = judged.verdict, judged.noise
        compared = getattr(result, "comparison", None) is not None
        claim = (verdict is Verdict.improved and best_of_round) if compared else \
            (None if best_of_round else False)
        improved = self.policy.observe(judged.score, spent_s=spent, noise=noise,
                                       improved=claim)
        reminder = _reminder(iteration, verdict, result, noise)
        if reminder:
            state.reminders.append(reminder)
        self.agent.observe(proposal, _score(result), verdict.value)
        self._write(iteration, kind, proposal, parent, diff.diff, result.feedback_dict(),
                    verdict, result.time_ms, improved=improved, message=reminder or "")
        state.history.append(self._note(iteration, proposal, verdict, parent, reminder,
                                        result.time_ms))
        state.context_feedback = result.text
        if improved:
            state.best_source, state.best_result = str(proposal.source), result
        return improved

    def _not_evaluated(self, state: _State, iteration: int, kind: RoundKind, proposal: Proposal,
                       diff: str, verdict: Verdict, error_kind: str, message: str) -> bool:
        state.reminders.append(message)
        self.policy.observe(None)
        self.agent.observe(proposal, None, verdict.value)
        feedback = unevaluated_feedback(error_kind, message)
        self._write(iteration, kind, proposal, state.best_source, diff, feedback, verdict,
                    None, improved=False, message=message)
        state.history.append(self._note(iteration, proposal, verdict, state.best_source,
                                        message, None))
        state.context_feedback = message
        return False

    def _write(self, iteration: int, kind: RoundKind, proposal: Proposal, parent: str | None,
               diff: str, feedback: Any, verdict: Verdict, time_ms: float | None, *,
               improved: bool, message: str) -> None:
        record = build_record(self.info, iteration=iteration, round_kind=kind,
                              proposal=proposal, parent_source=parent, diff=diff,
                              feedback=feedback, verdict=verdict)
        where = self.writeback.write(record)
        self.records.append(record)
        outcome = RoundOutcome(iteration, kind, proposal.summary, verdict.value, time_ms,
                               self.policy.best_score, improved, message, proposal.rationale,
                               record.id)
        self.rounds.append(outcome)
        log.debug("round %d written (%s): %s", iteration, where, record.id)
        if self.live is not None:
            self.live.round_done()
        if self.on_round:
            self.on_round(outcome)

    def _note(self, iteration: int, proposal: Proposal, verdict: Verdict, parent: str,
              message: str | None, time_ms: float | None) -> RoundNote:
        child = header_constants(proposal.source or "")
        before = header_constants(parent)
        changes = {k: v for k, v in child.items() if before.get(k) != v}
        return RoundNote(iteration, proposal.summary, proposal.categories, verdict.value,
                         child, changes, time_ms, message)

    def _recall(self, state: _State) -> Recalled:
        if self.knowledge is None or not self.options.retrieval:
            return Recalled()
        recalled = recall(self.knowledge, self.task, self.info.dtype, self.info.env,
                          source=state.best_source, feedback=state.context_feedback,
                          regime=self.info.regime)
        if self.known is None:
            self.known = known(self.knowledge, self.task, self.info.dtype, self.info.env,
                               shapes=self._regime_labels())
        own = self.info.run_id
        recalled.experiences = [r for r in recalled.experiences if r.run_id != own]
        self.retrieved_ids.extend(r.id for r in recalled.experiences
                                  if r.id is not None and r.id not in self.retrieved_ids)
        return recalled

    def _regime_labels(self) -> list[str] | None:
        """The shapes this loop tunes and sweeps (one regime's, or the task's): the known
        configurations are the fastest measured there, not the largest speedup over some
        run's slow start on other shapes."""
        shapes = [s for group in (self.options.shapes, self.options.sweep_shapes)
                  if not isinstance(group, str) for s in group] or self.task.sweep_shapes
        return list(dict.fromkeys(self.task.shape_label(s) for s in shapes)) or None

    def _context(self, state: _State, iteration: int, kind: ProposalKind,
                 recalled: Recalled) -> AgentContext:
        return AgentContext(
            task=self.task, dtype=self.info.dtype, iteration=iteration, round_kind=kind,
            best_source=state.best_source, best_feedback=state.best_result.text,
            last_feedback=state.context_feedback, history=list(state.history),
            tried_hashes=set(state.tried), reminders=list(state.reminders),
            few_shot=recalled.few_shot, experiences=recalled.experiences,
            insights=recalled.insights,
            known_configs=self.known.configs if self.known else [],
            predicted=self.known.predicted if self.known else [],
            gpu_arch=self.info.env.arch, shapes=self._tuned_shapes(),
            sm_count=self.info.env.sm_count)

    def _tuned_shapes(self) -> list[tuple[int, ...]]:
        """The shapes each round times (one regime's): what launch-shape moves judge."""
        return resolve_shapes(self.task, self.options.shapes, self.info.env.arch != "cpu")[1]

    # -- the end of a run ---------------------------------------------------------------
    def _sweep(self, result: RunResult, iteration: int) -> None:
        """Best kernel vs the starting kernel over the full sweep, regressions flagged."""
        shapes = sweep_shape_set(self.options.sweep_shapes, self.info.env.arch != "cpu")
        self._evaluating(iteration, "sweep", "final sweep: the start and the best kernel "
                         "over the sweep shapes")
        start, _ = self._evaluate(result.start_source, None, shapes)
        result.start_sweep = start
        if result.best_source == result.start_source:
            result.best_sweep = start
            return
        best, _ = self._evaluate(result.best_source, start, shapes, result.start_source)
        result.best_sweep = best
        result.regressions = best.regressions if best.comparison else \
            regressions(best, start, noise_threshold(best, start))
        categories = sorted({c for r in self.records if r.verdict is Verdict.improved
                             for c in r.edit.categories}) or ["other"]
        proposal = Proposal(source=result.best_source, categories=tuple(categories),
                            summary=f"full shape sweep of the best kernel vs the start "
                                    f"({len(result.regressions)} shapes regressed)")
        verdict = judge(best, start, claimed_gain=False, noise=noise_threshold(best, start))
        record = build_record(self.info, iteration=iteration, round_kind="sweep",
                              proposal=proposal, parent_source=result.start_source,
                              diff=check(result.start_source, result.best_source).diff,
                              feedback=best.feedback_dict(), verdict=verdict)
        self.writeback.write(record)
        self.records.append(record)


def regressions(best: Any, start: Any, noise: float) -> dict[str, float]:
    """Shapes where the best kernel is slower than the start beyond noise: slowdown share."""
    if not (best.ok and best.timing_available and start.timing_available):
        return {}
    flagged = {}
    for shape, (median, _) in best.timings.items():
        before = start.timings.get(shape, (None, None))[0]
        if before and median > before * (1.0 + noise):
            flagged[shape] = median / before - 1.0
    return flagged


def _score(result: EvalResult, best: float | None = None) -> float | None:
    """The policy's score: measured time of a correct, trustworthy run; else None. With a
    comparison it is the best's figure over the measured ratio, so a run's chain of
    scores is a chain of comparisons, not of figures taken minutes apart."""
    if not (result.ok and result.timing_available and not result.suspect):
        return None
    comparison = getattr(result, "comparison", None)
    if comparison and best:
        return best / comparison.ratio
    return result.time_ms


def _reminder(iteration: int, verdict: Verdict, result: EvalResult, noise: float
              ) -> str | None:
    if verdict is Verdict.invalid:
        return (f"round {iteration} was INVALID: you claimed a gain but the time is within "
                f"noise ({noise:.0%}) of the parent. Claim only what the timing shows.")
    if verdict in (Verdict.failed, Verdict.incorrect):
        first = (result.error_message or "").strip().splitlines()[:1]
        return f"round {iteration} {verdict.value} ({result.error_kind}): " \
               f"{first[0][:200] if first else ''}"
    return None
