"""Evaluations per hour against the number of slots, and what Ray adds to one evaluation.

    python benchmarks/scale_out.py [--slots 1,2,4] [--jobs 8] [--repeats 3] [--ray]

Throughput: the same candidate evaluated ``--jobs`` times through ``LocalGpus`` with 1, 2
and 4 slots (on a machine without a GPU the slots are processes running Triton's CPU
interpreter; with GPUs, give as many GPUs as slots), after one warm-up evaluation per slot
(the slot's start is reported apart). Efficiency at N slots is its rate over N times the
one-slot rate. The arms alternate across repeats, so drift in the machine's load falls
on every arm alike.

Ray overhead (``--ray``): one evaluation through a one-slot Ray cluster started here on
loopback against the same evaluation in this process, interleaved, ``--repeats`` x 4
pairs; the median difference and its range.

Prints every wall time; medians with min-max ranges; the machine's core count.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

JOB: tuple[str, str, dict[str, Any]] = ("softmax", "", {"shapes": [(4, 64)], "seeds": 1,
                                                         "timeout_s": 300})


def _job() -> tuple[str, str, dict[str, Any]]:
    from kernelkb.kernels.discovery import get_task

    return (JOB[0], get_task("softmax").template, JOB[2])


def throughput(slots: int, jobs: int) -> tuple[float, float]:
    """(seconds to start the slots and run one evaluation each, evaluations per hour)."""
    from kernelkb.optimizer.eval_pool import LocalGpus

    job = _job()
    pool = LocalGpus([str(i) for i in range(slots)])
    try:
        began = time.perf_counter()
        warm = pool.evaluate_many([job] * slots)
        start_s = time.perf_counter() - began
        assert all(r.ok for r in warm), [r.error_message for r in warm]
        began = time.perf_counter()
        done = pool.evaluate_many([job] * jobs)
        wall = time.perf_counter() - began
        assert all(r.ok for r in done), [r.error_message for r in done]
    finally:
        pool.close()
    return start_s, jobs / wall * 3600


def ray_overhead(pairs: int) -> tuple[list[float], list[float]]:
    """(local walls, Ray walls) of one evaluation, interleaved."""
    import ray

    from kernelkb.optimizer import ray_cluster
    from kernelkb.optimizer.eval_pool import RayPool
    from kernelkb.optimizer.sandbox import evaluate

    task, source, kwargs = _job()
    ray.init(num_cpus=1, include_dashboard=False, logging_level="WARNING",
             log_to_driver=False)
    try:
        pool = RayPool(ray_cluster.Cluster("local", gpus=0, slots=1))
        pool.evaluate(task, source, **kwargs)  # the Ray worker's own start, apart
        evaluate(task, source, **kwargs)
        local, remote = [], []
        for i in range(pairs):
            for arm in ("local", "ray") if i % 2 == 0 else ("ray", "local"):
                began = time.perf_counter()
                result = evaluate(task, source, **kwargs) if arm == "local" else \
                    pool.evaluate(task, source, **kwargs)
                (local if arm == "local" else remote).append(time.perf_counter() - began)
                assert result.ok, result.error_message
    finally:
        ray.shutdown()
    return local, remote


def _span(values: list[float], digits: int = 2) -> str:
    return (f"median {statistics.median(values):.{digits}f} "
            f"[{min(values):.{digits}f}-{max(values):.{digits}f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", default="1,2,4")
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ray", action="store_true")
    args = parser.parse_args()
    counts = [int(n) for n in args.slots.split(",")]
    print(f"{os.cpu_count()} cores; {args.jobs} evaluations a measurement, "
          f"{args.repeats} repeats, arms alternating", flush=True)
    rates: dict[int, list[float]] = {n: [] for n in counts}
    starts: dict[int, list[float]] = {n: [] for n in counts}
    for r in range(args.repeats):
        for n in counts if r % 2 == 0 else list(reversed(counts)):
            start_s, rate = throughput(n, args.jobs)
            starts[n].append(start_s)
            rates[n].append(rate)
            print(f"repeat {r} slots {n}: {rate:.0f} evaluations/hour (slots started and "
                  f"warmed in {start_s:.1f} s)", flush=True)
    one = statistics.median(rates[counts[0]]) / counts[0]
    for n in counts:
        eff = statistics.median(rates[n]) / (n * one)
        print(f"slots {n}: {_span(rates[n], 0)} evaluations/hour; efficiency {eff:.2f}; "
              f"start {_span(starts[n], 1)} s")
    if args.ray:
        local, remote = ray_overhead(args.repeats * 4)
        print("local " + ", ".join(f"{w:.2f}" for w in local))
        print("ray   " + ", ".join(f"{w:.2f}" for w in remote))
        diffs = [b - a for a, b in zip(local, remote, strict=True)]
        print(f"one evaluation: local {_span(local)} s, through Ray {_span(remote)} s; "
              f"Ray adds {_span(diffs)} s "
              f"({statistics.median(diffs) / statistics.median(local):+.1%} of the median)")


if __name__ == "__main__":
    main()
