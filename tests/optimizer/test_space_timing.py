"""Shared rounds over a whole regime (optimizer/space_timing.py), on a simulated GPU clock
(the CPU has none): the same statistics as the pairwise comparison, fewer calls."""

from __future__ import annotations

import math
import random

from kernelkb.kernels.shared.vocabulary import Verdict
from kernelkb.optimizer import space_timing


class SimulatedClock:
    """GPU ms = the arm's base x a slow drift of the whole machine x log-normal jitter."""

    def __init__(self, seed: int, jitter: float = 0.03) -> None:
        self.rng = random.Random(seed)
        self.jitter, self.t, self.slept = jitter, 0, 0.0

    def sleep(self, ms: float) -> None:
        self.slept += ms

    def queue_round(self, calls):
        out = []
        for call, _ in calls:
            self.t += 1
            out.append(call() * (1 + 0.5 * (1 + math.sin(self.t / 150))) *
                       math.exp(self.rng.gauss(0, self.jitter)))
        return out

    def read(self, handles):
        return list(handles)


def kernel(ms: float):
    return lambda: ms


def arm(scale: float) -> dict:
    return {"rows=1": kernel(0.005 * scale), "rows=4096": kernel(0.2 * scale)}


def test_copies_are_neutral_and_a_slower_arm_is_caught_in_the_same_rounds() -> None:
    false = caught = 0
    for seed in range(40):
        arms = {"naive": arm(1.0), "copy": arm(1.0), "slower": arm(1.1), "faster": arm(0.8)}
        pairs = [("copy", "naive"), ("slower", "naive"), ("faster", "naive")]
        found = space_timing.measure(arms, pairs, {"rows=1": 1.0, "rows=4096": 1.0},
                                     SimulatedClock(seed), seed=seed)
        assert set(found.comparisons) == set(pairs) and not found.failed
        false += found.comparisons["copy", "naive"].outcome is not Verdict.neutral
        caught += found.comparisons["slower", "naive"].outcome is Verdict.regressed
        assert found.comparisons["faster", "naive"].outcome is Verdict.improved
        assert 0.9 < found.comparisons["faster", "naive"].ratio / 1.25 < 1.1
    assert false <= 2, f"{false} of 40 A/A pairs were not neutral"
    assert caught == 40


def test_a_parent_is_timed_once_for_all_its_children() -> None:
    children = {f"c{i}": arm(1.0 + 0.05 * i) for i in range(8)}
    arms = {"parent": arm(1.0), **children}
    pairs = [(c, "parent") for c in children]
    found = space_timing.measure(arms, pairs, {}, SimulatedClock(0), max_rounds=8,
                                 min_rounds=8)
    # pairwise, each of 8 comparisons times two arms: 16 arm-rounds a shape; here 9
    assert found.calls == found.rounds * 2 * 5 * len(arms)
    assert found.rounds == 8


def test_an_arm_that_raises_fails_alone() -> None:
    def broken():
        raise RuntimeError("illegal memory access")

    arms = {"parent": arm(1.0), "good": arm(0.9), "bad": {"rows=1": broken, "rows=4096": broken}}
    found = space_timing.measure(arms, [("good", "parent"), ("bad", "parent")], {},
                                 SimulatedClock(1))
    assert "illegal memory access" in found.failed["bad"]
    assert list(found.comparisons) == [("good", "parent")]


def test_narrow_pairs_stop_and_their_arms_leave_the_rounds() -> None:
    quiet = {"a": arm(1.0), "b": arm(2.0)}
    found = space_timing.measure(quiet, [("b", "a")], {}, SimulatedClock(2, jitter=0.0),
                                 min_rounds=6, max_rounds=16)
    c = found.comparisons["b", "a"]
    assert c.stopped == "narrow" and found.rounds == 6 and c.outcome is Verdict.regressed
