"""What containment costs per evaluation: the same candidate evaluated with the worker in
its namespaces (optimizer/sandbox/jail.py) and without them (scrubbed environment only),
alternating, plus the bare start of the jail around a Python that does nothing.

    python benchmarks/sandbox_overhead.py [--runs 5] [--task softmax]

Prints medians and every figure; on a GPU host the evaluation is timed too (the naive
kernel on its edge shapes), so the figure includes compiling into a fresh Triton cache;
a third row runs uncontained and reuses one Triton cache across evaluations: against the
plain row, what the fresh cache costs (the evaluator keeps it fresh per candidate so that
no candidate can plant compiled kernels for the next).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import evaluate, jail, runner


def _evaluation_s(task: str) -> float:
    t = get_task(task)
    began = time.perf_counter()
    result = evaluate(task, t.template, shapes=[t.edge_shapes[0]], seeds=1)
    if not result.ok:
        raise SystemExit(f"the naive {task} kernel failed: {result.text}")
    return time.perf_counter() - began


def _bare_start_s(jailed: bool) -> float:
    argv = [sys.executable, "-c", "pass"]
    with tempfile.TemporaryDirectory() as tmp:
        if jailed:
            Path(tmp, "home").mkdir()
            argv = jail.command(argv, workdir=tmp, cwd=f"{tmp}/home",
                                hide=runner.hidden_paths(), keep=runner.kept_paths())
        began = time.perf_counter()
        subprocess.run(argv, check=True)
        return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--task", default="softmax")
    args = parser.parse_args()
    reason = jail.unavailable_reason()
    if reason is not None:
        raise SystemExit(f"no namespaces on this host ({reason}): nothing to compare")
    real = jail.mode
    figures: dict[str, list[float]] = {"evaluation, namespaces": [], "evaluation, plain": [],
                                       "plain + shared cache": [],
                                       "bare start, namespaces": [], "bare start, plain": []}
    _evaluation_s(args.task)  # first run: caches and page cache warm
    shared = tempfile.mkdtemp(prefix="kernelkb_shared_triton_")
    fresh_env = runner.worker_env

    def shared_env(*a, **k):  # type: ignore[no-untyped-def]
        env = fresh_env(*a, **k)
        env["TRITON_CACHE_DIR"] = shared
        return env

    for _ in range(args.runs):
        figures["evaluation, namespaces"].append(_evaluation_s(args.task))
        jail.mode = lambda: (None, "off for the comparison")  # type: ignore[assignment]
        try:
            figures["evaluation, plain"].append(_evaluation_s(args.task))
            runner.worker_env = shared_env  # type: ignore[assignment]
            figures["plain + shared cache"].append(_evaluation_s(args.task))
        finally:
            jail.mode = real  # type: ignore[assignment]
            runner.worker_env = fresh_env
        figures["bare start, namespaces"].append(_bare_start_s(True))
        figures["bare start, plain"].append(_bare_start_s(False))
    for name, values in figures.items():
        print(f"{name:24s} median {statistics.median(values):7.3f} s   "
              + " ".join(f"{v:.3f}" for v in values))
    extra = (statistics.median(figures["evaluation, namespaces"])
             - statistics.median(figures["evaluation, plain"]))
    print(f"containment adds {extra:+.3f} s per evaluation (median difference)")


if __name__ == "__main__":
    main()
