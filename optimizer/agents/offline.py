"""The offline agent: no network, no key. It walks the task's catalog of real edits.

Candidates are single changes against the current best: "set X to v" for every knob and
structural variant the task offers, each rendered with ``task.render`` so it is a real
source edit. They are ranked by the evidence of retrieved experiences (same op and
hardware first, then related ops; see ``evidence``), ties broken by the catalog order
(variants first, then knobs, nearest values first), with epsilon-greedy exploration.
Exploration rounds pick a structurally different candidate: a variant flip, or a far
jump of a knob. Before any single edit, an exploit round adopts a configuration the
knowledge base measured best for this task on this GPU (or an alike one) whole. While
the best leaves SMs idle on the tuned shapes (small M, decode), the nearest points of
the space whose grid fills the GPU come first, as whole jumps (``launch_shape``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kernelkb.kernels.base import Knob, Task, Variant
from kernelkb.kernels.config import ConfigValue
from kernelkb.kernels.resources import smem_limit
from kernelkb.kernels.shared.hashing import source_hash
from kernelkb.kernels.shared.vocabulary import ProposalKind
from kernelkb.optimizer.agents import launch_shape
from kernelkb.optimizer.agents.base import AgentContext, Proposal, SearchExhausted
from kernelkb.optimizer.agents.evidence import Evidence, weigh


@dataclass(frozen=True)
class Candidate:
    param: str
    old: ConfigValue
    value: ConfigValue
    category: str
    structural: bool  # a variant flip rather than a knob move
    distance: int  # index distance from the current value (how far the jump is)
    rank: int  # catalog order
    config: dict[str, ConfigValue]  # the full configuration to render
    enabler: dict[str, ConfigValue]  # other changes needed to make it legal, if any
    help: str = ""  # what the parameter does, from the task's catalog
    fill: launch_shape.FillMove | None = None  # a launch-shape jump (fills idle SMs)

    def describe(self) -> str:
        """What changes and what the change does (the measured space's seeds read alike,
        so the two meet in the vector index)."""
        text = f"set {self.param} {self.old!r} -> {self.value!r}"
        if self.fill is not None:
            text = launch_shape.TAG + text
        if self.enabler:
            extra = ", ".join(f"{k}={v!r}" for k, v in self.enabler.items())
            text += f" (with {extra}, which it requires)"
        return f"{text}: {self.help}" if self.help else text


def catalog(task: Task, current: dict[str, ConfigValue],
            smem_limit: int | None = None) -> Iterator[Candidate]:
    """Every single change of the current config, in catalog order, made legal if needed
    (legal: the task's constraint, and the GPU's shared memory per block when known)."""
    rank = 0
    params = [(v, True) for v in task.variants] + [(k, False) for k in task.knobs]
    for param, structural in params:
        here = current[param.name]
        index = param.values.index(here) if here in param.values else 0
        order = sorted(range(len(param.values)), key=lambda i: (abs(i - index), i))
        for i in order:
            value = param.values[i]
            if value == here:
                continue
            config = {**current, param.name: value}
            enabler: dict[str, ConfigValue] = {}
            if task.why_illegal(config, smem_limit) is not None:
                enabler = _enabler(task, config, param.name, smem_limit) or {}
                if not enabler:
                    continue
                config.update(enabler)
            rank += 1
            yield Candidate(param.name, here, value, param.category, structural,
                            abs(i - index), rank, config, enabler, param.help)


def _enabler(task: Task, config: dict[str, ConfigValue], fixed: str,
             smem_limit: int | None = None) -> dict | None:
    """The first single other change (catalog order) that makes ``config`` legal."""
    params: tuple[Knob | Variant, ...] = (*task.variants, *task.knobs)
    for param in params:
        if param.name == fixed:
            continue
        for value in param.values:
            if task.why_illegal({**config, param.name: value}, smem_limit) is None:
                return {param.name: value}
    return None


class OfflineAgent:
    name = "offline"
    model: str | None = None
    fixed_round_kind: ProposalKind | None = None  # the policy's exploit / explore schedule

    def __init__(self, *, epsilon: float = 0.1, seed: int = 0) -> None:
        self.epsilon = epsilon
        self._rng = random.Random(seed)
        self.base_note = ""  # set when the candidates are edits of a runner-up
        self.last_ranking: list[tuple[Candidate, Evidence]] = []

    def rank(self, context: AgentContext) -> list[tuple[Candidate, Evidence]]:
        """Untried single edits of the best config, best evidence first, then catalog
        order. When every one was tried, the single edits of the runner-up configs of this
        run (fastest first): a budget left is spent one step off the best path rather than
        given back (on attention the best point is five edits away; the walk stalled at 13
        of 20 evaluations)."""
        self.base_note = ""
        ranked = self._rank_from(context, context.best_config)
        for time_ms, base in _runner_ups(context):
            if ranked:
                break
            ranked = self._rank_from(context, base)
            self.base_note = f"from the runner-up at {time_ms:.4f} ms: "
        return ranked

    def _rank_from(self, context: AgentContext, base: dict[str, ConfigValue]
                   ) -> list[tuple[Candidate, Evidence]]:
        task, records = context.task, context.experiences
        insight_bonus = _insight_bonus(context.insights)
        ranked = []
        for cand in catalog(task, base, smem_limit(context.gpu_arch)):
            source = task.render(cand.config)
            if source_hash(source) in context.tried_hashes:
                continue
            evidence = weigh(records, task, context.gpu_arch, cand.param, cand.value,
                             cand.category, cand.config)
            evidence.score += _history_vote(context, cand)
            evidence.score += insight_bonus.get(cand.category, 0.0)
            ranked.append((cand, evidence))
        ranked.sort(key=lambda pair: (-round(pair[1].score, 6), pair[0].rank))
        filling = self._fill_candidates(context, base)
        taken = {tuple(sorted(c.config.items())) for c, _ in filling}
        return filling + [(c, e) for c, e in ranked
                          if tuple(sorted(c.config.items())) not in taken]

    def _fill_candidates(self, context: AgentContext, base: dict[str, ConfigValue]
                         ) -> list[tuple[Candidate, Evidence]]:
        """Whole jumps to points that fill idle SMs on the tuned shapes, best first, while
        the base under-fills and fewer than FILL_TRIES of them lost in this run; a jump
        the retrieved experiences speak against (net negative evidence) is left to the
        ordinary ranking."""
        task = context.task
        if launch_shape.failed_tries(context.history) >= launch_shape.FILL_TRIES:
            return []
        moves = launch_shape.fill_moves(task, base, context.shapes, context.dtype,
                                        context.sm_count, smem_limit(context.gpu_arch))
        out = []
        for move in moves:
            if source_hash(task.render(move.config)) in context.tried_hashes:
                continue
            (param, value), *rest = move.changes.items()
            spec = next(p for p in task.params if p.name == param)
            evidence = weigh(context.experiences, task, context.gpu_arch, param, value,
                             spec.category, move.config)
            evidence.score += _history_vote(context, Candidate(
                param, base[param], value, spec.category, False, 0, 0, move.config, {}))
            if evidence.score < 0:
                continue
            cand = Candidate(param, base[param], value, spec.category,
                             isinstance(spec, Variant), 0, 0, dict(move.config),
                             dict(rest), spec.help, move)
            out.append((cand, evidence))
        return out

    def propose(self, context: AgentContext) -> Proposal:
        adopted = self.adoption(context) if context.round_kind == "exploit" else None
        if adopted is not None:
            return adopted
        ranked = self.rank(context)
        self.last_ranking = ranked
        if not ranked:
            raise SearchExhausted(f"every single edit of {context.task.name} was tried")
        if context.round_kind == "explore":
            cand, evidence = max(ranked, key=lambda p: (p[0].structural, p[0].distance,
                                                        p[1].score, -p[0].rank))
            why = "exploration round: the most structurally different untried edit"
        elif self._rng.random() < self.epsilon:
            cand, evidence = self._rng.choice(ranked)
            why = f"epsilon exploration (epsilon={self.epsilon})"
        else:
            cand, evidence = ranked[0]
            why = "highest evidence" if evidence.score else "catalog order (no evidence)"
            if cand.fill is not None:
                why = (f"launch shape first: the best fills "
                       f"{cand.fill.fill - cand.fill.gain:.2f} of the GPU on the tuned "
                       f"shapes ({context.sm_count} SMs; full = {launch_shape.FILLED:g} "
                       f"programs per SM on each shape, less {launch_shape.LAUNCH_COST:g} "
                       f"per extra launch), this point {cand.fill.fill:.2f}")
        cited = "; ".join(evidence.notes[:4]) or "no retrieved experience on it"
        rationale = f"{why}; evidence score {evidence.score:+.2f}: {cited}"
        summary = f"{self.base_note}{cand.describe()}"
        best = context.best_config
        categories = {cand.category} | {_category(context.task, k) for k, v in
                                         cand.config.items() if best.get(k) != v}
        return Proposal(source=context.task.render(cand.config), summary=summary,
                        categories=tuple(sorted(categories)), claimed_gain=False,
                        rationale=rationale)

    def adoption(self, context: AgentContext) -> Proposal | None:
        """Adopt a known best configuration whole (one the knowledge base measured for
        this task on this or an alike GPU, or, where this GPU has measured nothing of the
        task, the learned ranker's first; ``optimizer.recall.known``), if legal, not the
        current best and not tried: one evaluation instead of a walk of single edits."""
        task, best = context.task, context.best_config
        for item in context.known_configs:
            config = {**task.default_config, **item.config}
            if config == best or task.why_illegal(config, smem_limit(context.gpu_arch)):
                continue
            source = task.render(config)
            if source_hash(source) in context.tried_hashes:
                continue
            changed = {k: v for k, v in config.items() if best.get(k) != v}
            listed = ", ".join(f"{k}={v!r}" for k, v in changed.items())
            if item.kind == "predicted":
                return Proposal(
                    source=source, summary=f"adopt a predicted best configuration: {listed}",
                    categories=tuple(sorted({_category(task, k) for k in changed})),
                    rationale=f"ranker's order (nothing measured on this GPU yet): "
                              f"{item.evidence}")
            if item.kind == "related":
                return Proposal(
                    source=source,
                    summary=f"adopt a related op's best configuration: {listed}",
                    categories=tuple(sorted({_category(task, k) for k in changed})),
                    rationale=f"cross-task transfer (bootstrap plan of a related op): "
                              f"{item.evidence} "
                              f"[{', '.join(i[:10] for i in item.example_ids)}]")
            return Proposal(
                source=source, summary=f"adopt a known best configuration: {listed}",
                categories=tuple(sorted({_category(task, k) for k in changed})),
                rationale=f"known configuration (bootstrap plan): {item.evidence} "
                          f"[{', '.join(i[:10] for i in item.example_ids)}]")
        return None

    def preflight(self) -> None:
        """Nothing to check: no endpoint behind it."""

    def observe(self, proposal: Proposal, score: float | None, verdict: str) -> None:
        """Its memory is the run's history, which arrives through the context."""


def _runner_ups(context: AgentContext) -> list[tuple[float, dict[str, ConfigValue]]]:
    """Correct, timed configs of this run other than the best, fastest first."""
    best, seen = context.best_config, set()
    out: list[tuple[float, dict[str, ConfigValue]]] = []
    timed = [(n.time_ms, n) for n in context.history if n.time_ms is not None
             and n.verdict in ("improved", "neutral", "regressed")]
    for time_ms, note in sorted(timed, key=lambda t: t[0]):
        default = context.task.default_config  # header constants that are not knobs stay
        config: dict[str, ConfigValue] = {
            **default, **{k: v for k, v in note.config.items() if k in default}}
        key = tuple(sorted(config.items()))
        if config != best and key not in seen:
            seen.add(key)
            out.append((time_ms, config))
    return out


def _category(task: Task, name: str) -> str:
    return next(p.category for p in task.params if p.name == name)


def _history_vote(context: AgentContext, cand: Candidate) -> float:
    """This run's own rounds: a value that failed here before is unlikely to work now."""
    vote = 0.0
    for note in context.history:
        if note.changes.get(cand.param) == cand.value:
            vote += {"improved": 1.0, "failed": -1.0, "incorrect": -1.0,
                     "regressed": -0.5}.get(note.verdict, 0.0)
    return vote


def _insight_bonus(insights: list[Any]) -> dict[str, float]:
    """A small push per category from aggregated insights (win rate minus loss rate)."""
    bonus: dict[str, float] = {}
    for item in insights:
        category = getattr(item, "category", None)
        count = getattr(item, "count", 0) or 0
        if category and count:
            rate = (getattr(item, "wins", 0) - getattr(item, "losses", 0)) / count
            bonus[category] = 0.3 * rate
    return bonus
