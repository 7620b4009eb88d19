"""GPU time of a call, and the interleaved comparison a verdict is made from.

Why: a figure from one evaluation compared with a figure from another is noise on a GPU.
On the H200 the same naive kernel measured 0.046-0.118 ms from one evaluation to the
next, launch-bound shapes carried tens of microseconds of Python launch cost, and a fresh
machine read 2.8x slow for minutes. So a verdict is a comparison made inside one worker:

- **GPU time, per call.** A round's calls are queued behind a sleep kernel long enough to
  cover their host side (wrapper, launcher, guards), so each call's two events bracket
  the GPU's own work and nothing of the host's; the L2 is flushed before each call. Call time
  (host included) is measured elsewhere (timing.py) and reported beside it.
- **Interleaved.** Candidate and incumbent alternate call by call (ABAB, then BABA in the
  next round) on the same input sets, so drift of clocks or temperature reaches both.
- **Repeated until sure.** Each round gives one log ratio (the shapes' medians, weighted
  as the task declares); rounds go on until the 95% interval of the mean is narrower than
  ``TARGET_HALF_WIDTH`` or a cap is reached. The interval, the rounds and the noise floor
  go into the record: "improved" only when the whole interval clears the floor.
- **Steady state.** ``settle`` runs a fixed workload until it times the same twice in a
  row, before anything is timed, and says how long that took.

Imports only torch and the floor's verdict rule (the sandbox's rule: it runs on a bare GPU
host); the statistics and the rule are kernels/shared/comparison.py.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch

from kernelkb.kernels.shared.comparison import (
    NOISE_FLOOR,
    Comparison,
    from_rounds,
    iqr,
    mean_interval,
)

TARGET_HALF_WIDTH = 0.006  # stop once the 95% interval of the log ratio is this narrow
MIN_ROUNDS = 6
MAX_ROUNDS = 40
CALLS_PER_ROUND = 5  # per arm and shape; a round's figure is the median of these
TIME_CAP_S = 25.0  # a comparison never takes longer than this (then: the interval so far)
FLUSH_BYTES = 256 * 2**20  # larger than any GPU's L2 (the H200 has 60 MiB)
SLEEP_MARGIN_MS = 0.05
MAX_SLEEP_MS = 20.0
SETTLE_TOLERANCE = 0.01
SETTLE_BURST_MS = 20.0

Call = Callable[[], Any]

class GpuClock:
    """Per-call GPU time with the host side hidden behind a sleep kernel (module doc).

    A batch of calls is queued behind ONE sleep sized to twice the host time of the whole
    batch: the GPU then runs flush, start, call, end, flush, ... with no gap the host
    could fill. One sleep per call, sized to the call's mean host time, was not enough:
    the candidate's launches carry the launch check's bookkeeping (one in eight is
    described in full), and on the H200 that read as a 2-7% A/A bias (rmsnorm, swiglu)."""

    def __init__(self) -> None:
        self.flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
        self.cycles_per_ms = _sleep_rate()

    def sleep(self, ms: float) -> None:
        torch.cuda._sleep(int(self.cycles_per_ms * min(ms, MAX_SLEEP_MS)))

    def host_ms(self, call: Call, calls: int = 8) -> float:
        """The slowest host milliseconds of ``calls`` calls while the GPU is busy."""
        torch.cuda.synchronize()
        self.sleep(MAX_SLEEP_MS)
        worst = 0.0
        for _ in range(calls):
            began = time.perf_counter()
            call()
            worst = max(worst, (time.perf_counter() - began) * 1e3)
        torch.cuda.synchronize()
        return worst

    def queue_round(self, calls: list[tuple[Call, float]]
                    ) -> list[tuple[torch.cuda.Event, torch.cuda.Event]]:
        """Queue (call, its host ms) in order behind one sleep; events around each call,
        the L2 flushed before each."""
        self.sleep(2.0 * sum(host for _, host in calls) + SLEEP_MARGIN_MS)
        handles = []
        for call, _ in calls:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            self.flush.zero_()
            start.record()
            call()
            end.record()
            handles.append((start, end))
        return handles

    def read(self, handles: list[tuple[torch.cuda.Event, torch.cuda.Event]]) -> list[float]:
        """GPU ms of queued calls, once the GPU has run them."""
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in handles]

    def samples(self, call: Call, calls: int, host_ms: float) -> list[float]:
        return self.read(self.queue_round([(call, host_ms)] * calls))


def _sleep_rate() -> float:
    """Cycles of torch.cuda._sleep per millisecond, as this GPU runs now."""
    cycles = 2_000_000
    torch.cuda._sleep(cycles)  # first call loads the kernel
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    return cycles / max(start.elapsed_time(end), 1e-3)


@dataclass
class Settled:
    """How the GPU was brought to a steady state before timing (``settle``)."""

    settled: bool
    seconds: float
    burst_ms: float  # the reference workload's last burst
    first_burst_ms: float  # its first: the ratio of the two is how cold the GPU was

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def settle(max_s: float = 3.0, min_s: float = 0.3) -> Settled:
    """Run a fixed matrix-product burst until two bursts in a row agree within 1% (and at
    least ``min_s`` has passed): the GPU has left its idle clocks. A fresh machine read
    2.8x slow for minutes when timed straight away."""
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    began = time.perf_counter()
    bursts: list[float] = []
    while True:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(8):
            a @ a
        end.record()
        end.synchronize()
        bursts.append(start.elapsed_time(end))
        spent = time.perf_counter() - began
        steady = len(bursts) >= 3 and abs(bursts[-1] / bursts[-2] - 1) < SETTLE_TOLERANCE \
            and abs(bursts[-2] / bursts[-3] - 1) < SETTLE_TOLERANCE
        if (steady and spent >= min_s) or spent >= max_s:
            return Settled(steady, round(spent, 3), bursts[-1], bursts[0])


def compare(candidate: Mapping[str, Call], incumbent: Mapping[str, Call],
            weights: Mapping[str, float], clock: GpuClock, *,
            noise_floor: float = NOISE_FLOOR, target: float = TARGET_HALF_WIDTH,
            min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS,
            calls: int = CALLS_PER_ROUND, time_cap_s: float = TIME_CAP_S,
            on_round: Callable[[int], None] | None = None) -> Comparison:
    """Candidate against incumbent on the same shapes (labels), interleaved call by call."""
    labels = list(candidate)
    total = sum(weights.get(k, 1.0) for k in labels)
    share = {k: weights.get(k, 1.0) / total for k in labels}
    host = {k: (clock.host_ms(candidate[k]), clock.host_ms(incumbent[k])) for k in labels}
    for k in labels:  # warm both arms: caches, allocator, first-call paths
        clock.samples(candidate[k], 2, host[k][0])
        clock.samples(incumbent[k], 2, host[k][1])
    began = time.perf_counter()
    per_shape: dict[str, list[float]] = {k: [] for k in labels}
    times: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in labels}
    rounds: list[float] = []
    stopped = "max_rounds"
    for r in range(max_rounds):
        for k in labels:
            cand, inc = _interleaved(clock, candidate[k], incumbent[k], host[k], calls, r % 2)
            times[k][0].extend(cand)
            times[k][1].extend(inc)
            per_shape[k].append(math.log(statistics.median(inc) / statistics.median(cand)))
        rounds.append(sum(share[k] * per_shape[k][-1] for k in labels))
        if on_round:
            on_round(r + 1)
        even = len(rounds) % 2 == 0  # as many ABAB rounds as BABA: no order favoured
        if even and len(rounds) >= min_rounds and mean_interval(rounds)[1] <= target:
            stopped = "narrow"
            break
        if time.perf_counter() - began > time_cap_s and len(rounds) >= 2 and even:
            stopped = "time_cap"
            break
    return from_rounds(rounds, per_shape, times, host, calls=calls, noise_floor=noise_floor,
                       seconds=time.perf_counter() - began, stopped=stopped)


def _interleaved(clock: GpuClock, a: Call, b: Call, host: tuple[float, float], calls: int,
                 swap: int) -> tuple[list[float], list[float]]:
    """``calls`` of each, alternating (A B A B ..., or B A B A ... when ``swap``)."""
    first, second = ((b, host[1]), (a, host[0])) if swap else ((a, host[0]), (b, host[1]))
    times = clock.read(clock.queue_round([first, second] * calls))
    ones, twos = times[0::2], times[1::2]
    return (twos, ones) if swap else (ones, twos)


def gpu_profile(call: Call, clock: GpuClock, rounds: int = 8, calls: int = CALLS_PER_ROUND
                ) -> tuple[float, float, float]:
    """(median GPU ms, IQR, host ms) of one call alone: for a kernel with no incumbent (a
    run's first round, a baseline); its spread is within one evaluation only."""
    host = clock.host_ms(call)
    clock.samples(call, 2, host)
    samples = [t for _ in range(rounds) for t in clock.samples(call, calls, host)]
    return statistics.median(samples), iqr(samples), host
