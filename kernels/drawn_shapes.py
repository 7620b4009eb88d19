"""Shapes off the task's lists: a kernel is checked on a shape no list names.

Why: every shape an evaluation names comes from the task's own lists (edge, cpu, sweep)
or from the caller's, and a candidate can read those lists too: honest on the shapes it
knows and fast, unsafe, everywhere else, it passes every named check while users' shapes
(a new batch size, a new vocabulary) meet the unsafe path. A shape drawn afresh inside
the lists' bounds is one it cannot have prepared for.

How: each dimension is drawn log-uniformly between the least and the largest value the
shapes it is drawn among give it; a dimension they never vary keeps its one value, one
whose declared values (all of the task's lists) are all powers of two stays a power of
two (a head size), and one whose values are all 0 or 1 (a flag) keeps a declared value.
A draw that does not fit the caller's cap (bytes, FLOPs) has its largest free dimension
halved until it does; a draw that some list names is drawn again. Whether the reference
accepts the shape is the caller's to check (``optimizer/sandbox/judge.py`` draws again
where it raises).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

Shape = tuple[int, ...]
TRIES = 20  # draws before giving up (a task whose lists leave no shape off them)


def draw_shape(among: Sequence[Shape], declared: Sequence[Shape],
               fits: Callable[[Shape], bool], rng: random.Random) -> Shape | None:
    """A shape within ``among``'s bounds that no shape of ``declared`` equals and that
    ``fits``; None when ``TRIES`` draws found none."""
    if not among:
        return None
    named = {tuple(s) for s in declared} | {tuple(s) for s in among}
    columns = list(zip(*among, strict=True))
    kinds = [_kind(column, [s[i] for s in named]) for i, column in enumerate(columns)]
    for _ in range(TRIES):
        shape = [_draw(kind, column, rng) for kind, column in zip(kinds, columns, strict=True)]
        free = [i for i, kind in enumerate(kinds) if kind in ("range", "pow2")]
        while not fits(tuple(shape)):
            shrinkable = [i for i in free if shape[i] > max(min(columns[i]), 1)]
            if not shrinkable:
                break
            i = max(shrinkable, key=lambda j: shape[j])
            shape[i] = max(min(columns[i]), shape[i] // 2, 1)
        drawn = tuple(shape)
        if drawn not in named and fits(drawn):
            return drawn
    return None


def _kind(column: Sequence[int], declared_values: Sequence[int]) -> str:
    if len(set(column)) == 1:
        return "fixed"
    if set(declared_values) <= {0, 1}:
        return "flag"
    if all(v > 0 and v & (v - 1) == 0 for v in declared_values):
        return "pow2"
    return "range"


def _draw(kind: str, column: Sequence[int], rng: random.Random) -> int:
    low, high = max(min(column), 1), max(column)
    if kind == "fixed":
        return column[0]
    if kind == "flag":
        return rng.choice(sorted(set(column)))
    if kind == "pow2":
        return 1 << rng.randint(low.bit_length() - 1, high.bit_length() - 1)
    return max(low, min(high, round(math.exp(rng.uniform(math.log(low), math.log(high))))))
