"""PNG charts drawn on the server with matplotlib's object API (no pyplot: its global
state is not safe across the server's worker threads).

Drawing takes ~0.2-0.5 s on 2 cores, so each chart is cached by the figures it shows:
the same data draws the same PNG, new data a new one (no staleness to manage)."""

from __future__ import annotations

import io
from functools import lru_cache
from typing import Any, NamedTuple

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

# titles and labels carry stored names (an op, a GPU, a Triton version): "$...$" in one is
# text, not mathtext to parse (a name like "$\\frac{1}$" failed the whole chart)
matplotlib.rcParams["text.parse_math"] = False

WIN, NEUTRAL, LOSS = "#2e7d32", "#9e9e9e", "#e65100"


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=96)
    return out.getvalue()


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="gray")
    ax.set_xticks([])
    ax.set_yticks([])


class _Row(NamedTuple):
    """One category's figures, as drawn (hashable: the cache key)."""

    category: str
    count: int
    wins: int
    losses: int
    median_speedup: float | None
    best_speedup: float | None


def category_wins(categories: list[Any], title: str) -> bytes:
    """Per edit category: wins / other / losses as stacked bars (how often), and the
    median and best speedup of the measured wins (by how much)."""
    return _category_wins(tuple(_Row(c.category, c.count, c.wins, c.losses,
                                     c.median_speedup, c.best_speedup) for c in categories),
                          title)


@lru_cache(maxsize=128)
def _category_wins(categories: tuple[_Row, ...], title: str) -> bytes:
    height = 0.45 * max(len(categories), 3) + 1.4
    fig = Figure(figsize=(9, height))
    # fixed margins: a layout engine doubles the drawing time (~0.4 s more on 2 cores)
    fig.subplots_adjust(left=0.17, right=0.98, bottom=0.7 / height, top=1 - 0.75 / height,
                        wspace=0.08)
    often, much = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [3, 2]})
    if not categories:
        _empty(often, "no experiences")
        _empty(much, "")
        return _png(fig)
    names = [c.category for c in categories][::-1]
    rows = categories[::-1]
    y = range(len(rows))
    wins = [c.wins for c in rows]
    losses = [c.losses for c in rows]
    other = [c.count - c.wins - c.losses for c in rows]
    often.barh(y, wins, color=WIN, label="won")
    often.barh(y, other, left=wins, color=NEUTRAL, label="neutral / invalid")
    often.barh(y, losses, left=[w + o for w, o in zip(wins, other, strict=True)], color=LOSS,
               label="lost")
    often.set_yticks(list(y), names)
    often.set_xlabel("experiences")
    often.set_title("how often it won")
    often.legend(fontsize=8, loc="lower right")
    median = [c.median_speedup or 0.0 for c in rows]
    best = [c.best_speedup or 0.0 for c in rows]
    much.barh(y, median, color=WIN, alpha=0.8, label="median win")
    much.scatter(best, list(y), color="black", marker="|", s=200, label="best win", zorder=3)
    much.axvline(1.0, color="black", linewidth=0.8)
    much.set_xlim(left=min([0.9, *[m for m in median if m]]))
    much.set_xlabel("speedup vs parent (measured wins)")
    much.set_title("by how much")
    much.legend(fontsize=8, loc="lower right")
    fig.suptitle(title, fontsize=11, y=1 - 0.12 / height)
    return _png(fig)


def best_so_far(points: list[tuple[int, float]], rounds: int, title: str) -> bytes:
    """The run's best time after each round (step plot)."""
    return _best_so_far(tuple(points), rounds, title)


@lru_cache(maxsize=128)
def _best_so_far(points: tuple[tuple[int, float], ...], rounds: int, title: str) -> bytes:
    fig = Figure(figsize=(7, 3.2))
    fig.subplots_adjust(left=0.11, right=0.98, bottom=0.16, top=0.9)
    ax = fig.subplots()
    if points:
        xs, ys = zip(*points, strict=True)
        ax.step(xs, ys, where="post", color=WIN, marker="o", markersize=4)
        ax.set_xlim(-0.5, max(rounds - 0.5, max(xs) + 0.5))
        ax.set_ylim(bottom=0)
        ax.set(xlabel="round", ylabel="best time so far (ms)")
    else:
        _empty(ax, "no GPU timing (CPU interpreter: correctness only)")
    ax.set_title(title, fontsize=11)
    return _png(fig)

