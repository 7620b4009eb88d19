"""The counts ``kernelkb optimize`` prints agree: --max-iters counts rounds, and each shape
regime's baseline is said apart (a 3-round run over 3 regimes once said "after 5
rounds"). Real RoundOutcome values, as the loop makes them."""

from __future__ import annotations

from kernelkb.kb.entry.cli.optimize import rounds_text
from kernelkb.optimizer.loop import RoundOutcome


def _outcome(iteration: int, kind: str) -> RoundOutcome:
    return RoundOutcome(iteration, kind, "a summary", "neutral", None, None, improved=False)


def test_three_regimes_of_one_round_each_are_three_rounds() -> None:
    rounds = [_outcome(i, kind) for _ in range(3) for i, kind in enumerate(("baseline",
                                                                             "exploit"))]
    assert rounds_text(rounds) == "3 rounds (and 3 baselines, one per shape regime)"


def test_one_regime_says_its_rounds_alone() -> None:
    assert rounds_text([_outcome(0, "baseline"), _outcome(1, "exploit"),
                        _outcome(2, "explore")]) == "2 rounds"
    assert rounds_text([_outcome(0, "baseline"), _outcome(1, "exploit")]) == "1 round"
