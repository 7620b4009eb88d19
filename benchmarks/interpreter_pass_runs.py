"""The interpreter's pass (optimizer/sandbox/interpreter_pass.py) over the best kernels of
the shipped H200 runs: GPU-tuned kernels that passed every GPU check, so an out-of-bounds
finding here is either a real bug or a false alarm to look at. Prints each kernel's
verdict and the wall seconds of its pass (a jailed interpreter worker, as a GPU
evaluation starts it), then the spread.

    python benchmarks/interpreter_pass_runs.py [--runs benchmarks/runs] [--parallel 2]
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernelkb.kernels.base import get_task
from kernelkb.optimizer.sandbox import interpreter_pass


def one(path: Path) -> tuple[str, str, float]:
    match = re.fullmatch(r"best_(\w+)\.py", path.name)
    assert match, path
    task = get_task(match.group(1))
    request = {"mode": "evaluate", "task": task.name, "source": path.read_text(),
               "dtype": "float16", "seed_base": 7, "refuse_introspection": True,
               "settle_s": 3.0, "peaks": {}}
    began = time.monotonic()
    found = interpreter_pass.run(task, request, timeout_s=300)
    verdict = f"OUT OF BOUNDS: {found.failure[:200]}" if found.failure else found.note
    return f"{path.parent.name}/{path.name}", verdict, time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("benchmarks/runs"))
    parser.add_argument("--parallel", type=int, default=2)
    args = parser.parse_args()
    files = sorted(args.runs.glob("*/best_*.py"))
    if not files:
        raise SystemExit(f"no best_*.py under {args.runs}")
    with ThreadPoolExecutor(args.parallel) as pool:
        rows = list(pool.map(one, files))
    for name, verdict, seconds in rows:
        print(f"{seconds:6.1f} s  {name}: {verdict}")
    walls = sorted(s for _, _, s in rows)
    found = sum(v.startswith("OUT OF BOUNDS") for _, v, _ in rows)
    print(f"{len(rows)} kernels, {found} out of bounds; wall per pass median "
          f"{statistics.median(walls):.1f} s [{walls[0]:.1f}, {walls[-1]:.1f}] "
          f"({args.parallel} at once on {__import__('os').cpu_count()} cores)")


if __name__ == "__main__":
    main()
