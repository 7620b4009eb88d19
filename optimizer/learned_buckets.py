"""Dispatch buckets learned from measurements: split where the measured best changes.

Why: a task's fixed regime bounds (M <= 16, cols <= 2048, ...) are guesses made before
anything was timed; the exported table ships a configuration per bucket, so a bound in
the wrong place runs a configuration that lost on the shapes beside it (issue 48). From
per-shape timings of several configurations this module finds, for each dimension the
task's rule reads (and their product), the measured shapes in order and where the
fastest configuration changes; the key is the one whose buckets lose the least time
against each shape's own fastest (then the fewest changes). Each bound sits at the
geometric middle between the last shape of one winner and the first of the next, so a
shape between two measured ones takes the nearer one's configuration, and one past every
measured shape the outermost bucket's, with its distance from the measured span said by
the runtime (dispatch_runtime.dispatch_distance).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Measured:
    """One configuration timed on one shape; ``peer``: the fastest checked peer there."""

    shape: Shape
    config: str  # the configuration's id (the caller maps ids to configurations)
    time_ms: float
    peer: str | None = None
    peer_ms: float | None = None


@dataclass
class Bucket:
    name: str
    bound: int | None  # inclusive upper bound of the key; None: unbounded
    config: str
    span: tuple[int, int]  # the smallest and largest measured key value in it
    measured: list[dict[str, Any]]


@dataclass
class Learned:
    dim: str  # the key: one dim's name, or "*".join(dims) for their product
    dims: list[str]
    inputs: list[list[int]]
    buckets: list[Bucket]
    changes: dict[str, int]  # candidate key -> how many times the winner changes along it

    def rule(self, reason: str) -> dict[str, Any]:
        """The table's rule (dispatch_runtime reads dims, inputs, classes)."""
        return {"dims": self.dims, "inputs": self.inputs,
                "classes": [[b.name, b.bound] for b in self.buckets], "reason": reason,
                "learned": {"key": self.dim, "changes": self.changes}}


def _winners(values: dict[Shape, int], measured: list[Measured]
             ) -> list[tuple[int, str, list[Measured]]]:
    """Per distinct key value, in order: (value, fastest configuration, its rows): the
    smallest geometric-mean time over the shapes with that value it was timed on."""
    by_value: dict[int, list[Measured]] = defaultdict(list)
    for m in measured:
        by_value[values[m.shape]].append(m)
    out = []
    for value in sorted(by_value):
        rows = by_value[value]
        per: dict[str, list[float]] = defaultdict(list)
        for m in rows:
            per[m.config].append(math.log(m.time_ms))
        best = min(per, key=lambda c: (sum(per[c]) / len(per[c]), c))
        out.append((value, best, [m for m in rows if m.config == best]))
    return out


def _regret(values: dict[Shape, int], segments: list[list[Any]],
            measured: list[Measured]) -> float:
    """Log time lost, summed over the shapes, by running each bucket's configuration
    instead of the shape's own fastest (shapes where it was not timed add nothing)."""
    chosen = {v: config for config, vs, _ in segments for v in vs}
    times: dict[Shape, dict[str, float]] = defaultdict(dict)
    for m in measured:
        times[m.shape][m.config] = m.time_ms
    return sum(math.log(per[chosen[values[shape]]] / min(per.values()))
               for shape, per in times.items() if chosen[values[shape]] in per)


def _segments(winners: list[tuple[int, str, list[Measured]]]) -> list[list[Any]]:
    segments: list[list[Any]] = []
    for value, config, rows in winners:
        if segments and segments[-1][0] == config:
            segments[-1][1].append(value)
            segments[-1][2].extend(rows)
        else:
            segments.append([config, [value], list(rows)])
    return segments


def learn(shape_names: tuple[str, ...], rule: dict[str, Any], measured: list[Measured]
          ) -> Learned | None:
    """Buckets from ``measured`` over the dims of the task's ``rule`` (its ``dims`` and
    ``inputs``); None when nothing was measured or the rule reads no dimension."""
    dims, inputs = list(rule.get("dims", [])), [list(p) for p in rule.get("inputs", [])]
    measured = [m for m in measured if m.time_ms and m.time_ms > 0]
    if not dims or not measured:
        return None
    candidates: dict[str, tuple[list[str], list[list[int]]]] = {
        d: ([d], [p]) for d, p in zip(dims, inputs, strict=True)}
    if len(dims) > 1:
        candidates["*".join(dims)] = (dims, inputs)
    found: dict[str, list[list[Any]]] = {}
    regret: dict[str, float] = {}
    for key, (names, _) in candidates.items():
        values = {m.shape: math.prod(int(m.shape[shape_names.index(n)]) for n in names)
                  for m in measured}
        found[key] = _segments(_winners(values, measured))
        regret[key] = _regret(values, found[key], measured)
    changes = {k: len(s) - 1 for k, s in found.items()}
    # the least time lost against each shape's own best, then the fewest changes; a tie
    # goes to the task's own rule (the product), then the rule's order
    key = min(found, key=lambda k: (round(regret[k], 6), changes[k], k != "*".join(dims),
                                    list(found).index(k)))
    names, at = candidates[key]
    segments = found[key]
    label = key.lower().replace("*", "_")
    buckets: list[Bucket] = []
    for n, (config, values, rows) in enumerate(segments):
        last = n == len(segments) - 1
        bound = None if last else max(values[-1], math.isqrt(values[-1] * segments[n + 1][1][0]))
        if len(segments) == 1:
            name = f"{label}_all"
        elif last:
            name = f"{label}_gt_{buckets[-1].bound}"
        else:
            name = f"{label}_le_{bound}"
        buckets.append(Bucket(name, bound, config, (values[0], values[-1]),
                              [_row(m, shape_names, names) for m in rows]))
    return Learned(key, names, at, buckets, changes)


def _row(m: Measured, shape_names: tuple[str, ...], names: list[str]) -> dict[str, Any]:
    return {"shape": ",".join(f"{n}={v}" for n, v in zip(shape_names, m.shape, strict=False)),
            "value": math.prod(int(m.shape[shape_names.index(n)]) for n in names),
            "time_ms": m.time_ms, "peer": m.peer, "peer_ms": m.peer_ms,
            "vs_peer": round(m.peer_ms / m.time_ms, 4) if m.peer_ms else None}


def bucket_lines(table: dict[str, Any]) -> list[str]:
    """The report's view of a learned table: per GPU and bucket, the range, the
    configuration, and each measured shape with its time and the figure against the
    best peer (peer time / ours: above 1 ours is faster)."""
    learned = table.get("rule", {}).get("learned")
    if not learned:
        return []
    lines = ["", "## Dispatch buckets (learned from the measurements)", "",
             f"Key: {learned['key']} (the best configuration changes {learned['changes']} "
             "times along each candidate key; the key chosen loses the least time against "
             "each shape's own fastest). A shape outside every measured span runs the "
             "nearest bucket's configuration.",
             "", "| GPU | bucket | up to | measured span | configuration | measured shape | "
             "ms | best peer | vs peer |", "|---|---|---:|---|---|---|---:|---|---:|"]
    bounds = dict(table["rule"]["classes"])
    for gpu, item in table["gpus"].items():
        for name, entry in item["regimes"].items():
            config = ", ".join(f"{k}={v}" for k, v in entry["config"].items()) or "-"
            span = entry.get("span") or ["?", "?"]
            for n, row in enumerate(entry.get("measured") or [{}]):
                head = (f"| {gpu} | {name} | {bounds.get(name) or 'inf'} | {span[0]}..{span[1]} "
                        f"| {config} |") if n == 0 else "| | | | | |"
                vs = f"{row['vs_peer']:.2f}x" if row.get("vs_peer") else "-"
                ms = f"{row['time_ms']:.4f}" if row.get("time_ms") else "-"
                lines.append(f"{head} {row.get('shape', '-')} | {ms} | "
                             f"{row.get('peer') or '-'} | {vs} |")
    return lines
