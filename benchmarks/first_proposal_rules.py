"""First-proposal rules for an unseen GPU, compared on training data and the development
split only: does a robust consensus (worst case, median or normalised rank, votes) put
the first proposal within 10% of the best more often than the similarity-weighted mean
of time / best the product uses (retrieval/ranker.py, ``consensus_value``), or than the
mean of its log it used before?

Reads the Kernel Tuner caches benchmarks/transfer_gpus.py reads (``--data``). For each
kernel and each GPU held out in turn (its case), every rule picks one configuration from
the other GPUs' relative times (mean log relative time over the shapes; a failure twice
the slowest). Two scores per rule:

- inner: each of the case's training GPUs held out in turn, the rule applied to the
  other four: hits within 10% of that GPU's best and the geometric mean of its first /
  best (training data alone, per kernel);
- development: the held-out GPU's convolution cases (the development split of
  transfer_gpus.py); the dedispersion cases (its test split) are not scored here.

A second table scores the first two proposals of the consensus rules: the first within
10% / the better of the two within 3% (the product's first two: the mean of time / best,
then the mean of its log; before, its second came from the validated order).

    python -m benchmarks.first_proposal_rules [--data PATH]
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.transfer_gpus import DEFAULT_DATA, load_kernel_tuner
from kernelkb.retrieval.hardware import STACK_POWER, gpu_similarity
from kernelkb.retrieval.ranker import group_tables

WITHIN = math.log(1.10)
WITHIN_3 = math.log(1.03)
PRODUCT = "weighted mean of time / best, similarity^4 (the product)"
GEOMETRIC = "weighted mean, similarity^4 (the product before)"
DEVELOPMENT = "convolution"
Sources = dict[str, np.ndarray]
Rule = Callable[[Sources, dict[str, float]], np.ndarray]


def weighted(values: Sources, sims: dict[str, float], power: float) -> np.ndarray:
    weights = {g: sims[g] ** power for g in values}
    return sum(weights[g] * values[g] for g in values) / sum(weights.values())


def ranks(values: Sources) -> Sources:
    return {g: np.argsort(np.argsort(v, kind="stable")) / len(v) for g, v in values.items()}


def worst_of_nearest(k: int) -> Rule:
    def rule(values: Sources, sims: dict[str, float]) -> np.ndarray:
        near = sorted(values, key=lambda g: -sims[g])[:k]
        return np.max([values[g] for g in near], axis=0) + 1e-3 * weighted(values, sims, 4)
    return rule


def vote(power: float) -> Rule:
    def rule(values: Sources, sims: dict[str, float]) -> np.ndarray:
        hits = {g: (v <= WITHIN).astype(float) for g, v in values.items()}
        return -weighted(hits, sims, power) + 1e-3 * weighted(values, sims, STACK_POWER)
    return rule


def ratio(values: Sources) -> Sources:
    """Relative times as time / best (their logs exponentiated)."""
    return {g: np.exp(v) for g, v in values.items()}


RULES: dict[str, Rule] = {
    "weighted mean of time / best, similarity^4 (the product)":
        lambda v, s: weighted(ratio(v), s, STACK_POWER),
    "weighted mean, similarity^4 (the product before)": lambda v, s: weighted(v, s, STACK_POWER),
    "mean of time / best": lambda v, s: weighted(ratio(v), s, 0),
    "weighted mean of time / best, similarity^2": lambda v, s: weighted(ratio(v), s, 2),
    "mean": lambda v, s: weighted(v, s, 0),
    "weighted mean, similarity^2": lambda v, s: weighted(v, s, 2),
    "median": lambda v, s: np.median(list(v.values()), axis=0),
    "worst case": lambda v, s: np.max(list(v.values()), axis=0),
    "worst case of the 2 most similar": worst_of_nearest(2),
    "worst case of the 3 most similar": worst_of_nearest(3),
    "weighted mean normalised rank": lambda v, s: weighted(ranks(v), s, STACK_POWER),
    "median normalised rank": lambda v, s: np.median(list(ranks(v).values()), axis=0),
    "worst normalised rank": lambda v, s: np.max(list(ranks(v).values()), axis=0),
    "vote within 10%": vote(0),
    "vote within 10%, weighted": vote(STACK_POWER),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    rows = load_kernel_tuner(args.data)
    facts = {r.gpu: r.gpu_facts for r in rows}
    per: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for (op, _), tables in group_tables(rows).items():
        for gpu, table in tables.items():
            for key, (label, _) in table.entries.items():
                per[op][gpu][key].append(label)
    values: dict[str, Sources] = {}
    for op, by_gpu in per.items():
        keys = sorted(set.intersection(*(set(v) for v in by_gpu.values())))
        values[op] = {g: np.array([np.mean(v[k]) for k in keys]) for g, v in by_gpu.items()}
    gpus = sorted(facts)

    def pick(rule: Rule, op: str, target: str, train: list[str]) -> float:
        sims = {g: gpu_similarity(facts[target], facts[g]) for g in train}
        choice = int(np.argmin(rule({g: values[op][g] for g in train}, sims)))
        return float(values[op][target][choice])

    print("| rule | inner: convolution | inner: dedispersion | development (convolution) | "
          "first / best per held-out GPU |")
    print("| --- | --- | --- | --- | --- |")
    for name, rule in RULES.items():
        inner = {}
        for op in sorted(values):
            firsts = [pick(rule, op, h, [g for g in gpus if g not in (t, h)])
                      for t in gpus for h in gpus if h != t]
            inner[op] = (f"{sum(v <= WITHIN for v in firsts)} of {len(firsts)} "
                         f"({math.exp(np.mean(firsts)):.3f}x)")
        dev = [pick(rule, DEVELOPMENT, t, [g for g in gpus if g != t]) for t in gpus]
        print(f"| {name} | {inner.get('convolution')} | {inner.get('dedispersion')} | "
              f"{sum(v <= WITHIN for v in dev)} of {len(dev)} | "
              + ", ".join(f"{t.split()[-1]} {math.exp(v):.2f}" for t, v in zip(gpus, dev,
                                                                           strict=True))
              + " |")

    # the first two proposals: a safe first (time / best) and a second from the mean log
    pairs = {
        "mean log (the product's first before)": [RULES[GEOMETRIC]],
        "time / best": [RULES[PRODUCT]],
        "time / best, then mean log (the product)": [RULES[PRODUCT], RULES[GEOMETRIC]],
        "mean log, then time / best": [RULES[GEOMETRIC], RULES[PRODUCT]],
    }

    def picks(rules: list[Rule], op: str, target: str, train: list[str]) -> list[float]:
        sims = {g: gpu_similarity(facts[target], facts[g]) for g in train}
        chosen: list[int] = []
        for rule in rules:
            scores = rule({g: values[op][g] for g in train}, sims)
            chosen.append(next(int(i) for i in np.argsort(scores, kind="stable")
                               if int(i) not in chosen))
        return [float(values[op][target][i]) for i in chosen]

    def score(found: list[list[float]]) -> str:
        return (f"{sum(v[0] <= WITHIN for v in found)} / "
                f"{sum(min(v) <= WITHIN_3 for v in found)} of {len(found)}")

    print()
    print("| first two proposals | inner: convolution | inner: dedispersion | "
          "development (convolution) |")
    print("| --- | --- | --- | --- |")
    for name, rules in pairs.items():
        inner = {op: score([picks(rules, op, h, [g for g in gpus if g not in (t, h)])
                            for t in gpus for h in gpus if h != t]) for op in sorted(values)}
        dev = score([picks(rules, DEVELOPMENT, t, [g for g in gpus if g != t])
                     for t in gpus])
        print(f"| {name} | {inner.get('convolution')} | {inner.get('dedispersion')} | {dev} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
