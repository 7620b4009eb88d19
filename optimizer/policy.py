"""When to stop, and which rounds explore (the article's sections 3.3, 5.3 and 5.4).

Pure bookkeeping over a *score*: the measured time of a round's candidate (lower is
better), or ``None`` when there is no timing (a failed, invalid or CPU-only round). A
``None`` never counts as an improvement, so on a CPU host patience still runs out and
every stop condition stays reachable. The loop feeds it one observation per round.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelkb.kernels.shared.vocabulary import ProposalKind


class StopReason(str, Enum):
    patience = "patience"  # N rounds in a row without improvement
    max_iters = "max_iters"
    target_speedup = "target_speedup"
    budget = "budget"  # GPU (evaluation) seconds spent
    exhausted = "exhausted"  # the agent had nothing left to try
    interrupt = "interrupt"  # Ctrl-C or SIGTERM (a time limit): no sweep, the rounds reported
    agent_unavailable = "agent_unavailable"  # the LLM endpoint failed: no sweep, rounds kept


@dataclass(frozen=True)
class PolicyConfig:
    patience: int = 6
    max_iters: int = 100
    target_speedup: float | None = None  # best time vs the baseline round's time
    budget_s: float | None = None
    explore_every: int = 10  # every Nth round is an exploration round
    min_noise: float = 0.02  # relative change that counts as real even with no spread

    def __post_init__(self) -> None:
        if self.patience < 1 or self.max_iters < 1 or self.explore_every < 1:
            raise ValueError("patience, max_iters and explore_every must be >= 1")
        if self.target_speedup is not None and self.target_speedup <= 1.0:
            raise ValueError("target_speedup must be > 1")
        if self.budget_s is not None and self.budget_s <= 0:
            raise ValueError("budget_s must be > 0")


@dataclass
class Policy:
    """Tracks the best score and answers 'what kind of round next?' and 'stop?'."""

    config: PolicyConfig = field(default_factory=PolicyConfig)
    baseline_score: float | None = None
    best_score: float | None = None
    rounds: int = 0  # rounds observed after the baseline
    since_improvement: int = 0
    spent_s: float = 0.0
    exhausted: bool = False

    def start(self, baseline_score: float | None, spent_s: float = 0.0) -> None:
        """The baseline round (iteration 0): the starting kernel's score."""
        self.baseline_score = self.best_score = baseline_score
        self.spent_s += spent_s

    def round_kind(self, iteration: int) -> ProposalKind:
        """Iteration 1.. : every ``explore_every``-th round explores, the rest exploit; and
        the round that would run out of patience explores (once a round has failed). Why:
        with patience 6 under a cadence of 10, a stalled run stopped without ever trying a
        structural variant (softmax's long rows on the H200 never reached the long-row
        path)."""
        # (not with patience 1: there every round would be the last chance)
        last_chance = 0 < self.since_improvement == self.config.patience - 1
        if iteration % self.config.explore_every == 0 or last_chance:
            return "explore"
        return "exploit"

    def is_improvement(self, score: float | None, noise: float = 0.0) -> bool:
        """Faster than the best by more than the noise threshold (and the floor)."""
        if score is None:
            return False
        if self.best_score is None:
            return True  # first timed correct candidate after an untimed baseline
        return self.best_score / score > 1.0 + max(noise, self.config.min_noise)

    def observe(self, score: float | None, *, spent_s: float = 0.0, noise: float = 0.0,
                improved: bool | None = None) -> bool:
        """Record one round; returns whether it improved on the best. ``improved``: the
        verdict of a comparison with the best (then ``score`` is the new best's figure);
        None: decided here from the scores."""
        self.rounds += 1
        self.spent_s += spent_s
        if improved is None:
            improved = self.is_improvement(score, noise)
        improved = improved and score is not None
        if improved:
            self.best_score = score
            self.since_improvement = 0
        else:
            self.since_improvement += 1
        return improved

    @property
    def remaining_s(self) -> float | None:
        """Evaluation seconds left in the budget (None without one)."""
        if self.config.budget_s is None:
            return None
        return max(0.0, self.config.budget_s - self.spent_s)

    @property
    def speedup(self) -> float | None:
        if self.baseline_score is None or self.best_score is None:
            return None
        return self.baseline_score / self.best_score

    def stop_reason(self) -> StopReason | None:
        """The first stop condition that holds, checked in a fixed order."""
        cfg = self.config
        if self.exhausted:
            return StopReason.exhausted
        if cfg.target_speedup is not None and (self.speedup or 0.0) >= cfg.target_speedup:
            return StopReason.target_speedup
        if cfg.budget_s is not None and self.spent_s >= cfg.budget_s:
            return StopReason.budget
        if self.rounds >= cfg.max_iters:
            return StopReason.max_iters
        if self.since_improvement >= cfg.patience:
            return StopReason.patience
        return None
