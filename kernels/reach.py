"""The reach: shapes past every list, drawn per evaluation where real models run.

Why: a kernel that stops short of what models ask (a window of the last 16K keys, a
table of the first 64K positions, a max over a row's first 2**17 columns, a K loop that
drops a tail past 32K) is right on every listed shape. A few fixed long shapes only move
the gap: a later round keyed its short path on a form they did not take (two new tokens,
nine rows, head_dim 256, K past the lists). So each dimension has a span (a range drawn
log-uniformly, or the values models use), and the judge draws one shape from the spans
per evaluation: the longest dimension past the lists, every other free, under a cost the
task names by shapes (``budget``): no more bytes and no more FLOPs than the costliest of
them (a long cache costs bytes, many new tokens over it FLOPs). A draw over it has its
other dimensions scaled down, one drawn at a time, then its longest: which one gives way
is drawn, so each corner of the budget (many new tokens over a short cache, many heads
over few) is met, not only the balanced shapes a fixed rule keeps. The longest is drawn
from the top half of its span one time in two (the reach itself), else across it (the
band between the lists and the reach). A short path keyed on any region of the spans
meets a draw in turn; one keyed on a corner past every budget (64 sequences over 128K
keys under the interpreter) is left to the GPU's larger budget.
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
    # the costliest shapes the judge pays for: a draw costs no more bytes and no more FLOPs
    # than the most of them
    budget: tuple[Shape, ...]

    def __post_init__(self) -> None:
        if not self.budget or any(len(self.spans) != len(b) for b in self.budget):
            raise ValueError(f"{len(self.spans)} spans for budget shapes {self.budget}")
        if any(len(span) == 0 for span in self.spans):
            raise ValueError(f"an empty span in {self.spans}")

    @property
    def longest(self) -> int:
        """The dimension at the reach: the range that starts highest."""
        starts = [span.start if isinstance(span, range) else 0 for span in self.spans]
        return max(range(len(starts)), key=starts.__getitem__)

    def draw(self, measures: Sequence[Callable[[Shape], float]], rng: random.Random) -> Shape:
        """One shape of the spans that no measure (bytes, FLOPs) puts over the budget (the
        first budget shape where ``TRIES`` draws cannot be brought under it)."""
        limits = [max(measure(b) for b in self.budget) for measure in measures]

        def over(shape: Sequence[int]) -> float:
            return max((m(tuple(shape)) / limit for m, limit in zip(measures, limits,
                                                                    strict=True) if limit > 0),
                       default=0.0)

        for _ in range(TRIES):
            shape = [_pick(span, rng, top=i == self.longest and rng.random() < 0.5)
                     for i, span in enumerate(self.spans)]
            others = [i for i in range(len(shape)) if i != self.longest]
            for dims in (others, [self.longest]):
                _scale_down(shape, dims, self.spans, over, rng)
            if over(shape) <= 1.0:
                return tuple(shape)
        return self.budget[0]


def _pick(span: Span, rng: random.Random, top: bool = False) -> int:
    """A value of the span: a choice, or log-uniform in a range (its top half: uniform)."""
    if isinstance(span, tuple):
        return rng.choice(span)
    low, high = span.start, span[-1]
    if top:
        return rng.randint((low + high) // 2, high)
    return min(high, max(low, round(math.exp(rng.uniform(math.log(low), math.log(high))))))


def _scale_down(shape: list[int], dims: Sequence[int], spans: Sequence[Span],
                over: Callable[[Sequence[int]], float], rng: random.Random) -> None:
    """Step one of ``dims``, drawn, down until the shape is within budget (``over`` <= 1)
    or none can go lower: a range by the factor it is over, a choice to the next smaller
    value. (Always the largest over its span's least met many new tokens over a long
    cache in 1% of draws, a wide N with a long K in 0.3%.)"""
    while (factor := over(shape)) > 1.0:
        lower = [i for i in dims if shape[i] > min(spans[i])]
        if not lower:
            return
        i = rng.choice(lower)
        span = spans[i]
        if isinstance(span, tuple):
            shape[i] = max(v for v in span if v < shape[i])
        else:
            shape[i] = max(span.start, min(shape[i] - 1, int(shape[i] / factor)))
