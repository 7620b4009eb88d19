"""Many configurations of one regime timed in shared rounds: the fast door's clock.

Pairwise, a space of n configurations costs n comparisons of two arms each, every parent
timed again for each of its children, each comparison with its own host-time probes
behind 20 ms sleeps: 0.48 s a point on the H200. Here every configuration is an *arm*
and each round times every arm that a still-open pair needs, on each shape of the
regime, ``calls`` times in a fresh random order each time (so drift, a clock step or a
neighbour's burst reaches every arm alike, as ABAB/BABA does for two). A pair (a
configuration and its parent) reads its rounds' paired log ratios, and its verdict is
the judge's own rule (kernels/shared/comparison.py): the same 95% interval, the same
floor. A pair whose interval is narrow stops; an arm no open pair needs drops out of the
later rounds.

The clock is the judge's (``compare.GpuClock``): the L2 flushed before each call, events
around it, a batch of calls queued behind one sleep that covers its host side.
"""

from __future__ import annotations

import logging
import math
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kernelkb.kernels.shared.comparison import (
    NOISE_FLOOR,
    Comparison,
    from_rounds,
    mean_interval,
)

log = logging.getLogger(__name__)

Call = Callable[[], Any]
Pair = tuple[str, str]  # (candidate arm, incumbent arm)

TARGET_HALF_WIDTH = 0.006  # the judge's: a pair stops once its interval is this narrow
BATCH_HOST_MS = 8.0  # host ms of calls queued behind one sleep (the sleep is twice this)
SLEEP_MARGIN_MS = 0.05


class Clock(Protocol):
    """What the rounds need of a GPU clock (compare.GpuClock has it)."""

    def sleep(self, ms: float) -> None: ...

    def queue_round(self, calls: list[tuple[Call, float]]) -> Any: ...

    def read(self, handles: Any) -> list[float]: ...


@dataclass
class Timed:
    """What the rounds found: a comparison per pair, and the arms that failed to run."""

    comparisons: dict[Pair, Comparison] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # arm -> why
    rounds: int = 0
    calls: int = 0  # timed calls in all
    seconds: float = 0.0


def host_times(clock: Clock, arms: Mapping[str, Mapping[str, Call]], passes: int = 2
               ) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """Each arm's host ms of one call per shape (the slowest of ``passes``), measured
    while the GPU is busy behind sleeps, and the arms whose call raised."""
    host: dict[str, dict[str, float]] = {a: {} for a in arms}
    failed: dict[str, str] = {}
    for _ in range(passes):
        clock.sleep(2 * BATCH_HOST_MS)
        spent = 0.0
        for arm, calls in arms.items():
            for label, call in calls.items():
                if arm in failed:
                    break
                began = time.perf_counter()
                try:
                    call()
                except Exception as err:  # noqa: BLE001 - this arm cannot be timed
                    failed[arm] = f"on ({label}): {type(err).__name__}: {err}"[:400]
                    continue
                ms = (time.perf_counter() - began) * 1e3
                host[arm][label] = max(host[arm].get(label, 0.0), ms)
                spent += ms
                if spent > BATCH_HOST_MS:
                    clock.read([])
                    clock.sleep(2 * BATCH_HOST_MS)
                    spent = 0.0
        clock.read([])
    return host, failed


def measure(arms: Mapping[str, Mapping[str, Call]], pairs: Sequence[Pair],
            weights: Mapping[str, float], clock: Clock, *, calls: int = 5,
            min_rounds: int = 6, max_rounds: int = 16, time_cap_s: float = 60.0,
            target: float = TARGET_HALF_WIDTH, noise_floor: float = NOISE_FLOOR,
            seed: int = 0, on_round: Callable[[int, int, int], None] | None = None) -> Timed:
    """Time every arm (label -> call on each shape) in shared rounds until each pair's
    interval is narrow, ``max_rounds`` or ``time_cap_s``; returns each pair's comparison.
    ``on_round(round, open pairs, pairs)`` after each round."""
    rng = random.Random(seed)
    labels = list(next(iter(arms.values()))) if arms else []
    total = sum(weights.get(k, 1.0) for k in labels)
    share = {k: weights.get(k, 1.0) / total for k in labels}
    began = time.perf_counter()
    host, failed = host_times(clock, arms)
    out = Timed(failed=dict(failed))
    open_pairs = [p for p in dict.fromkeys(pairs) if p[0] not in failed and p[1] not in failed]
    logs: dict[Pair, dict[str, list[float]]] = {p: {k: [] for k in labels} for p in open_pairs}
    samples: dict[str, dict[str, list[float]]] = {a: {k: [] for k in labels} for a in arms}
    for r in range(max_rounds):
        if not open_pairs:
            break
        active = sorted({a for p in open_pairs for a in p} - set(out.failed))
        medians = {}
        for label in labels:
            found = _one_shape_round(clock, active, arms, host, label, calls, rng, out)
            for arm, times in found.items():
                samples[arm][label].extend(times)
                medians[arm, label] = statistics.median(times)
        out.rounds = r + 1
        still = []
        for pair in open_pairs:
            cand, inc = pair
            if cand in out.failed or inc in out.failed:
                continue
            for label in labels:
                logs[pair][label].append(math.log(medians[inc, label] / medians[cand, label]))
            rounds = _weighted(logs[pair], share)
            narrow = len(rounds) >= min_rounds and mean_interval(rounds)[1] <= target
            capped = time.perf_counter() - began > time_cap_s and len(rounds) >= 2
            last = r + 1 == max_rounds
            if narrow or capped or last:
                stopped = "narrow" if narrow else "time_cap" if capped else "max_rounds"
                out.comparisons[pair] = _comparison(pair, logs[pair], rounds, samples, host,
                                                    calls, noise_floor, began, stopped)
            else:
                still.append(pair)
        open_pairs = still
        if on_round:
            on_round(r + 1, len(open_pairs), len(pairs))
    out.seconds = round(time.perf_counter() - began, 3)
    return out


def _weighted(per_shape: Mapping[str, list[float]], share: Mapping[str, float]) -> list[float]:
    rounds = len(next(iter(per_shape.values())))
    return [sum(share[k] * per_shape[k][i] for k in per_shape) for i in range(rounds)]


def _comparison(pair: Pair, per_shape: dict[str, list[float]], rounds: list[float],
                samples: dict[str, dict[str, list[float]]], host: dict[str, dict[str, float]],
                calls: int, floor: float, began: float, stopped: str) -> Comparison:
    cand, inc = pair
    times = {k: (list(samples[cand][k]), list(samples[inc][k])) for k in per_shape}
    hosts = {k: (host[cand][k], host[inc][k]) for k in per_shape}
    return from_rounds(rounds, per_shape, times, hosts, calls=calls, noise_floor=floor,
                       seconds=time.perf_counter() - began, stopped=stopped)


def _one_shape_round(clock: Clock, active: list[str], arms: Mapping[str, Mapping[str, Call]],
                     host: dict[str, dict[str, float]], label: str, calls: int,
                     rng: random.Random, out: Timed) -> dict[str, list[float]]:
    """``calls`` passes over the active arms on one shape, each pass in a fresh order,
    queued in batches behind one sleep each; GPU ms per arm. An arm that raises is
    marked failed and leaves the round."""
    order = [arm for _ in range(calls) for arm in rng.sample(active, len(active))]
    found: dict[str, list[float]] = {arm: [] for arm in active}
    batch: list[str] = []
    spent = 0.0
    for i, arm in enumerate(order):
        batch.append(arm)
        spent += host[arm][label]
        if spent >= BATCH_HOST_MS or i == len(order) - 1:
            _run_batch(clock, batch, arms, host, label, found, out)
            batch, spent = [], 0.0
    return {arm: times for arm, times in found.items() if times and arm not in out.failed}


def _run_batch(clock: Clock, batch: list[str], arms: Mapping[str, Mapping[str, Call]],
               host: dict[str, dict[str, float]], label: str, found: dict[str, list[float]],
               out: Timed) -> None:
    batch = [arm for arm in batch if arm not in out.failed]
    try:
        handles = clock.queue_round([(arms[arm][label], host[arm][label]) for arm in batch])
        times = clock.read(handles)
    except Exception as err:  # noqa: BLE001 - find which arm: run them one by one
        log.info("space timing: a batch on %s raised (%s); running its arms alone", label, err)
        for arm in dict.fromkeys(batch):
            try:
                clock.read(clock.queue_round([(arms[arm][label], host[arm][label])]))
            except Exception as one:  # noqa: BLE001
                out.failed[arm] = f"on ({label}): {type(one).__name__}: {one}"[:400]
        return
    out.calls += len(batch)
    for arm, ms in zip(batch, times, strict=True):
        found[arm].append(ms)
