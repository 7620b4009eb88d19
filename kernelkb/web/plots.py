"""PNG charts drawn on the server with matplotlib's object API (no pyplot: its global
state is not safe across the server's worker threads).

Drawing takes ~0.2-0.5 s on 2 cores, so each chart is cached by the figures it shows:
the same data draws the same PNG, new data a new one (no staleness to manage)."""

from __future__ import annotations

import inspect
import io
from functools import lru_cache
from typing import Any, NamedTuple

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

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
    tries: int  # the category's count (not ``count``: that is tuple.count)
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
    other = [c.tries - c.wins - c.losses for c in rows]
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


REGIME_COLOURS = ("#2e7d32", "#1565c0", "#6a1b9a", "#e65100", "#00838f", "#5d4037")


def best_so_far(series: list[tuple[str, list[tuple[int, float]]]], title: str) -> bytes:
    """The run's best time after each round, one step line per regime (each regime's
    rounds are numbered from 0 and timed on its own shapes: a line never crosses)."""
    return _best_so_far(tuple((name, tuple(points)) for name, points in series), title)


@lru_cache(maxsize=128)
def _best_so_far(series: tuple[tuple[str, tuple[tuple[int, float], ...]], ...],
                 title: str) -> bytes:
    fig = Figure(figsize=(7, 3.2))
    fig.subplots_adjust(left=0.11, right=0.98, bottom=0.16, top=0.9)
    ax = fig.subplots()
    timed = [(name, points) for name, points in series if points]
    if timed:
        ys = [y for _, points in timed for _, y in points]
        for i, (name, points) in enumerate(timed):
            xs, values = zip(*points, strict=True)
            label = f"{name or 'all shapes'}: {values[0] / values[-1]:.2f}x"
            ax.step(xs, values, where="post", color=REGIME_COLOURS[i % len(REGIME_COLOURS)],
                    marker="o", markersize=4, label=label)
        last = max(x for _, points in timed for x, _ in points)
        ax.set_xlim(-0.5, last + 0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if max(ys) / min(ys) > 4:  # regimes a decade apart: each line keeps its shape
            ax.set_yscale("log")
            plain = FuncFormatter(lambda v, _: f"{v:g}")  # not mathtext: parse_math is off
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
        else:
            ax.set_ylim(bottom=0)
        ax.set(xlabel="round (of its regime)", ylabel="best time so far (ms)")
        ax.legend(fontsize=8, loc="upper right")
    else:
        _empty(ax, "no GPU timing (CPU interpreter: correctness only)")
    ax.set_title(title, fontsize=11)
    return _png(fig)


def measurement_spread(boxes: list[tuple[str, tuple[float, float, float, float, float]]],
                       title: str) -> bytes:
    """Per measurement source: min, quartiles and max of the measured times over its
    fastest (1.0 = the fastest configuration), on a log axis: how much the configuration
    matters there."""
    return _measurement_spread(tuple(boxes), title)


@lru_cache(maxsize=128)
def _measurement_spread(boxes: tuple[tuple[str, tuple[float, float, float, float, float]], ...],
                        title: str) -> bytes:
    height = 0.4 * max(len(boxes), 3) + 1.3
    fig = Figure(figsize=(9, height))
    fig.subplots_adjust(left=0.3, right=0.98, bottom=0.7 / height, top=1 - 0.6 / height)
    ax = fig.subplots()
    if not boxes:
        _empty(ax, "no timed configurations")
    else:
        stats = [{"label": label if len(label) <= 36 else label[:17] + "…" + label[-18:],
                  "whislo": lo, "q1": q1, "med": med, "q3": q3, "whishi": hi, "fliers": []}
                 for label, (lo, q1, med, q3, hi) in boxes][::-1]
        # "orientation" from matplotlib 3.10 on ("vert", its older spelling, is deprecated)
        sideways = {"orientation": "horizontal"} if "orientation" in \
            inspect.signature(ax.bxp).parameters else {"vert": False}
        ax.bxp(stats, **sideways, showfliers=False, patch_artist=True,
               boxprops={"facecolor": "#c8e6c9"}, medianprops={"color": "black"})
        ax.tick_params(axis="y", labelsize=8)
        ax.set_xscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(FuncFormatter(
            lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))
        ax.axvline(1.0, color=WIN, linewidth=0.8)
        ax.set_xlabel("time / the fastest configuration's (whiskers: fastest and slowest)")
    fig.suptitle(title, fontsize=11, y=1 - 0.12 / height)
    return _png(fig)


class Panel(NamedTuple):
    """One knob (or launch feature) of the landscape, as drawn (hashable: the cache key).
    Categorical: x is the index of the value in ``ticks``; numeric (launch features):
    x is the value, on a log axis."""

    name: str
    ticks: tuple[str, ...]  # the values' labels (empty: a numeric axis)
    measured: tuple[tuple[float, float], ...]  # (x, time ms)
    best: tuple[float, float] | None
    predicted: tuple[tuple[float, float], ...]


PREDICTED = "#e65100"


def landscape(panels: list[Panel], title: str) -> bytes:
    """Measured time against each knob's values (a strip per value, jittered), the best
    configuration starred and the ranker's predicted configurations as open triangles."""
    return _landscape(tuple(panels), title)


@lru_cache(maxsize=64)
def _landscape(panels: tuple[Panel, ...], title: str) -> bytes:
    cols = min(3, max(len(panels), 1))
    rows = max(1, -(-len(panels) // cols))
    fig = Figure(figsize=(3.6 * cols, 2.7 * rows + 0.6))
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.12 / rows + 0.06, top=1 - 0.5 /
                        (2.7 * rows + 0.6), hspace=0.55, wspace=0.28)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    if not panels:
        _empty(axes[0], "nothing measured on this shape")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    for ax, p in zip(axes, panels, strict=False):
        jitter = [((i * 0.618) % 1 - 0.5) * 0.35 if p.ticks else 0.0
                  for i in range(len(p.measured))]
        if p.measured:
            ax.scatter([x + j for (x, _), j in zip(p.measured, jitter, strict=True)],
                       [y for _, y in p.measured], s=12, color="#1565c0", alpha=0.55,
                       linewidths=0, label="measured")
        if p.predicted:
            offset = 0.22 if p.ticks else 0.0
            ax.scatter([x + offset for x, _ in p.predicted], [y for _, y in p.predicted],
                       s=26, marker="^", facecolors="none", edgecolors=PREDICTED,
                       linewidths=1.0, label="predicted")
        if p.best:
            ax.scatter([p.best[0]], [p.best[1]], s=110, marker="*", color=WIN, zorder=5,
                       label="best measured")
        if p.ticks:
            ax.set_xticks(range(len(p.ticks)))
            ax.set_xticklabels([t if len(t) <= 8 else t[:7] + "…" for t in p.ticks],
                               fontsize=7, rotation=30 if len(p.ticks) > 5 else 0)
            ax.set_xlim(-0.6, len(p.ticks) - 0.4)
        else:
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(plain)
            ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
            ax.tick_params(axis="x", labelsize=7)
        ys = [y for _, y in (*p.measured, *p.predicted)]
        if ys and min(ys) > 0 and max(ys) / min(ys) > 8:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
        ax.tick_params(axis="y", labelsize=7)
        ax.set_title(p.name, fontsize=9)
        ax.set_ylabel("ms", fontsize=8)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    if panels:
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper right", fontsize=8, ncol=3)
    fig.suptitle(title, fontsize=10, x=0.02, ha="left")
    return _png(fig)
