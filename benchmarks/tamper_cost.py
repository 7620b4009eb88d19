"""What one tamper check costs: ``Snapshot.changes()`` timed on the CPU, the snapshot
built the way the worker builds it (after its watchers, whose audit hooks see every
``__code__`` read the check makes).

    TRITON_INTERPRET=1 python benchmarks/tamper_cost.py [--calls 200] [--bare]

``--bare`` leaves the watchers out (the check's own cost, no audit hooks). Prints the
median and the interquartile range of one call, in ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--bare", action="store_true", help="no watchers (no audit hooks)")
    args = parser.parse_args()

    import torch  # noqa: F401 - imported as the worker has them
    import triton  # noqa: F401

    from kernelkb.optimizer.sandbox import tamper

    if not args.bare:  # the worker's order (worker.Worker.evaluate)
        from kernelkb.optimizer.sandbox import forbidden, introspection, provenance, surroundings

        def is_candidate(path: str) -> bool:
            return os.path.basename(path) == "candidate.py"

        tracker = provenance.install(candidate_file="")
        tracker.warm_up()
        forbidden.watch(is_candidate)
        introspection.watch(is_candidate, module_name="candidate")
        surroundings.watch(is_candidate)
    began = time.perf_counter()
    snapshot = tamper.Snapshot(task_module="kernelkb.kernels.softmax")
    built_ms = (time.perf_counter() - began) * 1e3
    assert snapshot.changes() == [], snapshot.changes()
    times = []
    for _ in range(args.calls):
        began = time.perf_counter()
        snapshot.changes()
        times.append((time.perf_counter() - began) * 1e3)
    q1, median, q3 = statistics.quantiles(times, n=4)
    insides = sum(1 for _ in getattr(snapshot, "_insides", ()))
    print(f"{'bare' if args.bare else 'watched'}: {len(snapshot.entries)} namespaces, "
          f"{insides} objects with insides; snapshot {built_ms:.0f} ms; changes() over "
          f"{args.calls} calls: median {median:.2f} ms, IQR {q1:.2f}-{q3:.2f} ms "
          f"({q3 - q1:.2f})")


if __name__ == "__main__":
    main()
