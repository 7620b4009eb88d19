"""Figures over model seeds for benchmarks/transfer_gpus.py: each split's median and
geometric mean of E@3% per seed, their spread (median [min-max] over the seeds), the
product's walk against the best peer seed by seed, and the intervals' top-10 coverage.

Why per seed: a method that learns (the cost model, the GPs) gives another order under
another seed, so one seed's figure is one draw; the spread over seeds is what says
whether a difference between methods is more than that draw.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

PEERS = ("most_similar_gpu", "mean_rank", "rgpe")
LEARNED = ("rgpe", "ranker_zero_shot", "ranker")
SHOWN_METHODS = ("cold", *PEERS, "ranker_zero_shot", "ranker")


def _per_seed(case: dict[str, Any], method: str, seed: int) -> float:
    """E@3% of ``method`` on ``case`` under model seed ``seed``: its own run for a method
    that learns, the one run of a fixed order, the median over cold's random orders; a
    walk that never gets within 3% counts the whole space."""
    runs = case[method]["e3_runs"]
    if method in LEARNED:
        value = runs[seed]
    elif method == "cold":
        value = float(np.median(runs))
    else:
        value = runs[0]
    return min(float(value), float(case["configs"]))


def _first(case: dict[str, Any], method: str, seed: int) -> float:
    runs = case[method]["first_runs"]
    return runs[seed] if method in LEARNED else float(np.median(runs))


def seed_summary(gpu_cases: Sequence[dict[str, Any]], test_ops: Sequence[str]
                 ) -> dict[str, Any]:
    """split -> method -> {"median": [per seed], "geomean": [...], "first10": [...]}, and
    "vs_best_peer": the product's walk ("ranker") over the peer with the lowest median
    over seeds, per seed; "coverage": top-10 and all-configurations coverage per seed."""
    out: dict[str, Any] = {}
    seeds = min((len(c["ranker"]["e3_runs"]) for c in gpu_cases), default=0)
    splits = {"development": [c for c in gpu_cases if c["op"] not in test_ops],
              "test": [c for c in gpu_cases if c["op"] in test_ops], "all": list(gpu_cases)}
    for split, cases in splits.items():
        if not cases:
            continue
        table: dict[str, dict[str, list[float]]] = {}
        for method in SHOWN_METHODS:
            if not all(method in c for c in cases):
                continue
            values = [[_per_seed(c, method, s) for c in cases] for s in range(seeds)]
            table[method] = {
                "median": [float(np.median(v)) for v in values],
                "geomean": [float(math.exp(np.mean(np.log(v)))) for v in values],
                "first10": [float(sum(_first(c, method, s) <= 1.10 for c in cases))
                            for s in range(seeds)]}
        peers = [p for p in PEERS if p in table]
        best = {stat: min(peers, key=lambda p: (np.median(table[p][stat]), p))
                for stat in ("median", "geomean")}
        ratios = {stat: [a / b for a, b in zip(table["ranker"][stat], table[best[stat]][stat],
                                               strict=True)]
                  for stat in ("median", "geomean")}
        out[split] = {"cases": len(cases), "ops": sorted({c["op"] for c in cases}),
                      "methods": table, "best_peer": best, "vs_best_peer": ratios}
    coverage = []
    for s in range(seeds):
        totals = {"all": [0, 0], "shown": [0, 0]}
        widths = []
        for c in gpu_cases:
            iv = c["interval_seeds"][s]
            for part in totals:
                totals[part][0] += iv[part][0]
                totals[part][1] += iv[part][1]
            if iv.get("first"):
                widths.append(iv["first"][1] / iv["first"][0])
        coverage.append({"all": totals["all"], "shown": totals["shown"],
                         "first_width_median": float(np.median(widths)) if widths else None,
                         "first_width_max": float(max(widths)) if widths else None})
    out["coverage"] = coverage
    return out


def spread(values: Sequence[float], fmt: str = "{:g}") -> str:
    """median [min-max] over seeds."""
    arr = np.array(values, dtype=float)
    med, lo, hi = (fmt.format(float(v)) for v in (np.median(arr), arr.min(), arr.max()))
    return med if lo == hi else f"{med} [{lo}-{hi}]"


def summary_lines(payload: dict[str, Any]) -> list[str]:
    """The seed table and the goal lines of the report."""
    summary = payload.get("seed_summary") or {}
    if not summary.get("all"):
        return []
    lines = ["## Over model seeds", "",
             f"{payload['model_seeds']} model seeds (the cost model's and the GPs'); per "
             "seed, the median and geometric mean of E@3% over a split's cases (a walk "
             "that never gets within 3% counts the whole space), then median [min-max] "
             "over the seeds. The test split (" + ", ".join(payload["test_ops"]) + ") is "
             "the command line's default, fixed before these methods were compared. "
             "ranker = the product's walk (retrieval/walk.py), rgpe = the transfer-BO "
             "peer.", "",
             "| split | method | median E@3% | geomean E@3% | first within 10% |",
             "|---|---|---|---|---|"]
    for split in ("development", "test", "all"):
        part = summary.get(split)
        if not part:
            continue
        for method, stats in part["methods"].items():
            lines.append(f"| {split} ({', '.join(part['ops'])}; {part['cases']} cases) | "
                         f"{method} | {spread(stats['median'])} | "
                         f"{spread(stats['geomean'], '{:.1f}')} | "
                         f"{spread(stats['first10'], '{:.0f}')} of {part['cases']} |")
    lines += ["", "Product's walk over the best peer (most similar GPU, mean rank, RGPE), "
              "seed by seed:", ""]
    for split in ("development", "test", "all"):
        part = summary.get(split)
        if not part:
            continue
        texts = []
        for stat in ("median", "geomean"):
            ratio = part["vs_best_peer"][stat]
            texts.append(f"{stat} {spread(ratio, '{:.2f}')}x {part['best_peer'][stat]}"
                         f" ({'at most' if max(ratio) <= 1.0 else 'NOT at most'} 1.0x on "
                         f"every seed; goal <= 0.75x "
                         f"{'met' if max(ratio) <= 0.75 else 'missed'})")
        lines.append(f"- {split}: " + "; ".join(texts) + ".")
    coverage = summary.get("coverage") or []
    if coverage:
        shown = [c["shown"][0] / c["shown"][1] for c in coverage if c["shown"][1]]
        every = [c["all"][0] / c["all"][1] for c in coverage if c["all"][1]]
        widths = [c["first_width_median"] for c in coverage if c["first_width_median"]]
        lines += ["", f"- 80% intervals on the held-out GPUs, over seeds: first 10 of the "
                  f"product's list {spread([100 * v for v in shown], '{:.0f}')}% (goal "
                  f"75-85%), every configuration {spread([100 * v for v in every], '{:.0f}')}"
                  f"%; the first item's interval spans (high / low) "
                  f"{spread(widths, '{:.2f}')}x (median over cases)."]
    return lines
