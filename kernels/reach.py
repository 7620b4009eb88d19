"""The reach: shapes past every list, drawn per evaluation where real models run.

Why: a kernel that stops short of what models ask (a window of the last 16K keys, a
table of the first 64K positions, a max over a row's first 2**17 columns, a K loop that
drops a tail past 32K) is right on every listed shape. A few fixed long shapes only move
the gap: a later round keyed its short path on a form they did not take (two new tokens,
nine rows, head_dim 256, K past the lists). So each dimension has a span (a range drawn
log-uniformly, or the values models use), and the judge draws one shape from the spans
per evaluation: the longest dimension past the lists, every other free, under a cost the
task names by a shape (``budget``): a draw over it has its other dimensions scaled down,
then its longest. A short path keyed on any region of the spans meets a draw in turn.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Shape = tuple[int, ...]
Span = range | tuple[int, ...]  # a range drawn log-uniformly, or the values to choose from
TRIES = 20


@dataclass(frozen=True)
class Reach:
    spans: tuple[Span, ...]
    budget: Shape  # the costliest shape the judge pays for: draws cost no more than it

    def __post_init__(self) -> None:
        if len(self.spans) != len(self.budget):
            raise ValueError(f"{len(self.spans)} spans for a {len(self.budget)}-d budget")
        if any(len(span) == 0 for span in self.spans):
            raise ValueError(f"an empty span in {self.spans}")

    @property
    def longest(self) -> int:
        """The dimension at the reach: the range that starts highest."""
        starts = [span.start if isinstance(span, range) else 0 for span in self.spans]
        return max(range(len(starts)), key=starts.__getitem__)

    def draw(self, cost: Callable[[Shape], float], rng: random.Random) -> Shape:
        """One shape of the spans costing no more than the budget (the budget itself where
        ``TRIES`` draws cannot be brought under it)."""
        limit = cost(self.budget)
        for _ in range(TRIES):
            shape = [_pick(span, rng) for span in self.spans]
            others = [i for i in range(len(shape)) if i != self.longest]
            for dims in (others, [self.longest]):
                _scale_down(shape, dims, self.spans, cost, limit)
            if cost(tuple(shape)) <= limit:
                return tuple(shape)
        return self.budget


def _pick(span: Span, rng: random.Random) -> int:
    if isinstance(span, tuple):
        return rng.choice(span)
    low, high = span.start, span[-1]
    return min(high, max(low, round(math.exp(rng.uniform(math.log(low), math.log(high))))))


def _scale_down(shape: list[int], dims: Sequence[int], spans: Sequence[Span],
                cost: Callable[[Shape], float], limit: float) -> None:
    """Step the largest of ``dims`` (by its value over its span's least) down until the
    shape fits or none can go lower: a range by the factor the cost is over, a choice to
    the next smaller value."""
    while cost(tuple(shape)) > limit:
        lower = [i for i in dims if shape[i] > min(spans[i])]
        if not lower:
            return
        i = max(lower, key=lambda j: shape[j] / max(1, min(spans[j])))
        span = spans[i]
        if isinstance(span, tuple):
            shape[i] = max(v for v in span if v < shape[i])
        else:
            over = cost(tuple(shape)) / limit
            shape[i] = max(span.start, min(shape[i] - 1, int(shape[i] / over)))
