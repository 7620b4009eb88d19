"""Tuner mode (the article's section 7): the structure is fixed, a numeric search tunes.

The structural variants keep the current best's values; only the knobs move. ``grid``
walks the knob grid nearest-first; ``tpe`` is a compact Tree-structured-Parzen-like
search: once a few points are timed, it prefers knob values that are common among the
fastest quarter and rare among the rest (per-knob densities with Laplace smoothing).
Untimed rounds (CPU) carry no ranking, so ``tpe`` then falls back to random sampling.
Several knobs may change in one tuning round: that is the point of a tuner.

Where this GPU has measured nothing of the task, the learned ranker's order
(``AgentContext.predicted``, retrieval/prediction.py) replaces the nearest-first grid
order and the random start of ``tpe``: points it ranked come first, best predicted first.

Why not optuna's TPESampler (evaluated 2026-12-05, optuna 5.1 on the 2-core CPU, on the
data of tests/optimizer/agents/test_tuner.py): it picked the same point, but it samples
from the product of the knob values and cannot be given the legal untried points (the
task's constraint, the GPU's shared memory, the sources tried), so each pick is an
ask/tell loop that throws away what is illegal or tried (under the default structure
49 of matmul's 432 knob settings are legal, 5 of attention's 36, 32 of softmax's 90:
about nine asks a pick on matmul before any is tried); its densities leave out failed
trials, where here a failed or incorrect configuration counts as bad; and a pick took
2-9 ms against 0.17 ms here, after a 0.2 s import of four more packages (optuna,
alembic, mako, colorlog). Nothing in it would be simpler, and it would be slower.
tests/optimizer/agents/test_tuner.py holds what a swap would have to keep: the same
picks for a seed, failed points counted as bad, legal untried points only.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from kernelkb.kernels.base import Task
from kernelkb.kernels.config import ConfigValue
from kernelkb.kernels.resources import smem_limit
from kernelkb.kernels.shared.hashing import source_hash
from kernelkb.kernels.shared.vocabulary import ProposalKind
from kernelkb.optimizer.agents.base import AgentContext, Proposal, SearchExhausted

SEARCHES = ("grid", "tpe")


@dataclass
class _Observation:
    config: dict[str, ConfigValue]
    score: float | None  # time (lower is better); None = untimed
    failed: bool


@dataclass
class TunerAgent:
    search: str = "grid"
    seed: int = 0
    startup: int = 4  # timed points before tpe trusts its densities
    gamma: float = 0.25  # share of timed points that count as "good"
    name: str = "tuner"
    model: str | None = None
    fixed_round_kind: ProposalKind = "tune"
    observations: list[_Observation] = field(default_factory=list)
    # proposed and not yet observed, by source hash (a batch round has several)
    _pending: dict[str, dict[str, ConfigValue]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.search not in SEARCHES:
            raise ValueError(f"search must be one of {SEARCHES}, not {self.search!r}")
        self._rng = random.Random(self.seed)

    def space(self, task: Task, structure: dict[str, ConfigValue],
              smem_limit: int | None = None) -> list[dict]:
        """Legal knob settings with the variants fixed to ``structure``, nearest first
        (legal: the task's constraint, and the GPU's shared memory per block if known)."""
        fixed = {v.name: structure[v.name] for v in task.variants}
        points = []
        for values in itertools.product(*(k.values for k in task.knobs)):
            config = {**fixed, **dict(zip((k.name for k in task.knobs), values, strict=True))}
            if task.why_illegal(config, smem_limit) is None:
                points.append(config)
        return sorted(points, key=lambda c: _distance(task, structure, c))

    def propose(self, context: AgentContext) -> Proposal:
        task, best = context.task, context.best_config
        untried = [c for c in self.space(task, best, smem_limit(context.gpu_arch))
                   if source_hash(task.render(c)) not in context.tried_hashes]
        if not untried:
            raise SearchExhausted(f"the knob grid of {task.name} under this structure is done")
        order = _predicted_order(context.predicted)
        timed = sum(o.score is not None and not o.failed for o in self.observations)
        if order and (self.search == "grid" or timed < self.startup):
            untried.sort(key=lambda c: order.get(_key(c), len(order)))  # stable: then nearest
            rank = order.get(_key(untried[0]))
            config = untried[0]
            why = (f"the ranker's predicted order (rank {rank + 1}; a hint, nothing measured "
                   f"here yet), {len(untried)} left" if rank is not None else
                   f"grid point past the ranked ones, {len(untried)} left")
        elif self.search == "grid":
            config, why = untried[0], f"grid point, {len(untried)} left"
        else:
            config, why = self._tpe_pick(task, untried)
        source = task.render(config)
        self._pending[source_hash(source)] = config
        changed = {k: v for k, v in config.items() if best.get(k) != v}
        summary = "tune " + ", ".join(f"{k} {best.get(k)!r} -> {v!r}" for k, v in changed.items())
        categories = {p.category for p in task.knobs if p.name in changed} or {"other"}
        return Proposal(source=source, summary=summary,
                        categories=tuple(sorted(categories)), claimed_gain=False,
                        rationale=f"{self.search} search with the structure fixed: {why}")

    def preflight(self) -> None:
        """Nothing to check: no endpoint behind it."""

    def observe(self, proposal: Proposal, score: float | None, verdict: str) -> None:
        config = self._pending.pop(source_hash(proposal.source or ""), None)
        if config is not None:
            failed = verdict in ("failed", "incorrect")
            self.observations.append(_Observation(config, score, failed))

    def _tpe_pick(self, task: Task, untried: list[dict]) -> tuple[dict, str]:
        timed = sorted((o for o in self.observations if o.score is not None and not o.failed),
                       key=lambda o: o.score or 0.0)
        if len(timed) < self.startup:
            return self._rng.choice(untried), f"random start ({len(timed)}/{self.startup} timed)"
        n_good = max(1, int(len(timed) * self.gamma))
        good = [o.config for o in timed[:n_good]]
        bad = [o.config for o in timed[n_good:]] + [o.config for o in self.observations
                                                    if o.failed]

        def ratio(config: dict) -> float:
            value = 1.0
            for knob in task.knobs:
                n = len(knob.values)
                p_good = (sum(c[knob.name] == config[knob.name] for c in good) + 1) / \
                    (len(good) + n)
                p_bad = (sum(c[knob.name] == config[knob.name] for c in bad) + 1) / \
                    (len(bad) + n)
                value *= p_good / p_bad
            return value

        best = max(untried, key=ratio)
        return best, f"tpe: l/g = {ratio(best):.2f} from {len(good)} good / {len(bad)} bad"


def _distance(task: Task, a: dict, b: dict) -> tuple[int, int]:
    steps = [abs(k.values.index(a[k.name]) - k.values.index(b[k.name]))
             if a.get(k.name) in k.values else 1 for k in task.knobs]
    return sum(1 for s in steps if s), sum(steps)


def _key(config: dict) -> tuple:
    return tuple(sorted(config.items()))


def _predicted_order(predicted: list) -> dict[tuple, int]:
    """Configuration -> its position in the ranker's order (first occurrence)."""
    order: dict[tuple, int] = {}
    for item in predicted:
        order.setdefault(_key(dict(item.config)), len(order))
    return order
