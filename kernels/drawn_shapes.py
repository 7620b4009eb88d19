"""Shapes off the task's lists: a kernel is checked on a shape no list names.

Why: every shape an evaluation names comes from the task's own lists (edge, cpu, sweep)
or from the caller's, and a candidate can read those lists too: honest on the shapes it
knows and fast, unsafe, everywhere else, it passes every named check while users' shapes
(a new batch size, a new vocabulary) meet the unsafe path. A shape drawn afresh inside
the lists' bounds is one it cannot have prepared for.

How: the draw starts from one shape (the anchor: the judge takes one the evaluation
asked for, so one the worker has run; the bounds also take in the task's edge shapes)
and moves
each free dimension to another value of the same power-of-two bucket, no larger than the
anchor's and with the same divisibility by 16: those are what Triton specialises a
kernel on (a block size from ``next_power_of_2``, an argument's alignment), so the
drawn shape runs the kernels the checks already compiled and costs calls, not a compile
(a compile was most of the judge's share of an evaluation). A dimension the shapes
never vary keeps its one value; one whose declared values (all of the task's lists) are
all powers of two (a head size) or all 0 or 1 (a flag) takes one of the values the
shapes give it. A draw that
does not fit the caller's cap (bytes, FLOPs) has its largest free dimension halved
until it does; a draw that some list names is drawn again. Whether the reference
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
               fits: Callable[[Shape], bool], rng: random.Random,
               anchors: Sequence[Shape] | None = None) -> Shape | None:
    """A shape within ``among``'s bounds that no shape of ``declared`` equals and that
    ``fits``, anchored on one of ``anchors`` (default: ``among``); None when ``TRIES``
    draws found none."""
    if not among:
        return None
    anchors = list(anchors or among)
    named = {tuple(s) for s in declared} | {tuple(s) for s in among}
    columns = list(zip(*among, strict=True))
    kinds = [_kind(column, [s[i] for s in named]) for i, column in enumerate(columns)]
    for _ in range(TRIES):
        anchor = rng.choice(anchors)
        shape = [rng.choice(sorted(set(column))) if kind in ("flag", "pow2")
                 else _draw(kind, value, min(column), rng)
                 for kind, value, column in zip(kinds, anchor, columns, strict=True)]
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


def _draw(kind: str, value: int, least: int, rng: random.Random) -> int:
    """A value in ``value``'s power-of-two bucket, at most ``value`` and at least
    ``least``, divisible by 16 exactly when ``value`` is (a range dimension; any other
    keeps ``value``)."""
    if kind != "range" or value <= 2:
        return value
    bottom = max(least, 1 << (value - 1).bit_length() - 1) + 1  # the bucket is (2^k, 2^(k+1)]
    if bottom >= value:
        return value
    drawn = round(math.exp(rng.uniform(math.log(bottom), math.log(value))))
    if value % 16 == 0:
        drawn -= drawn % 16
    elif drawn % 16 == 0:
        drawn -= 1
    return drawn if bottom <= drawn <= value else value


def draw_larger(bounds: Sequence[Shape], anchor: Shape, size: Callable[[Shape], float],
                low: float, high: float, rng: random.Random) -> Shape | None:
    """A shape past ``anchor``: its ``size`` between ``low`` and ``high``, each dimension
    within the least and largest value ``bounds`` give it. Grown from ``anchor`` one free
    dimension at a time, in a random order, each by a random share of what is still
    missing (the last one by all of it), so the draw is long, wide or both; a dimension
    the bounds never vary, or whose values are all powers of two or flags, keeps the
    anchor's. None when ``TRIES`` draws found none (the anchor is at the bounds)."""
    columns = list(zip(*bounds, strict=True))
    kinds = [_kind(column, column) for column in columns]
    free = [i for i, kind in enumerate(kinds) if kind == "range"]
    for _ in range(TRIES):
        target = math.exp(rng.uniform(math.log(low), math.log(high)))
        shape = list(anchor)
        order = rng.sample(free, len(free))
        for turn in range(3):  # a size not linear in a dimension (a matmul's M) takes more
            for n, i in enumerate(order):
                now = size(tuple(shape))
                if now >= target:
                    break
                share = 1.0 if turn or n == len(order) - 1 else rng.uniform(0.3, 1.0)
                grown = math.ceil(max(shape[i], 1) * (target / max(now, 1e-9)) ** share)
                shape[i] = max(shape[i], min(max(columns[i]), grown))
        drawn = tuple(shape)
        if low <= size(drawn) <= high:
            return drawn
    return None
