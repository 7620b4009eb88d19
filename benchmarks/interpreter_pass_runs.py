"""The interpreter's pass (optimizer/sandbox/interpreter_pass.py) over the best kernels of
the shipped H200 runs: GPU-tuned kernels that passed every GPU check, so an out-of-bounds
finding here is either a real bug or a false alarm to look at. Prints each kernel's
verdict and the wall seconds of its pass (a jailed interpreter worker, as a GPU
evaluation starts it), then the spread.

    python benchmarks/interpreter_pass_runs.py [--runs benchmarks/runs] [--parallel 2]
    python benchmarks/interpreter_pass_runs.py --compare [--per-task 1] [--repeats 3]

``--compare``: each kernel's pass as it runs (one checked call a shape) and with the
counterfactual call it ran before as well, alternating, the order flipped every repeat;
prints both medians and their ratio.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import interpreter_pass
from kernelkb.optimizer.sandbox.runner import run_worker_beside


def one(path: Path, counterfactual: bool = False) -> tuple[str, str, float]:
    match = re.fullmatch(r"best_(\w+)\.py", path.name)
    assert match, path
    task = get_task(match.group(1))
    request = {"mode": "evaluate", "task": task.name, "source": path.read_text(),
               "dtype": "float16", "seed_base": 7, "refuse_introspection": True,
               "settle_s": 3.0, "peaks": {}}
    began = time.monotonic()
    if counterfactual:  # the pass as it was: request_for without bounds_only
        request = {**interpreter_pass.request_for(task, request), "bounds_only": False}
        outcome = run_worker_beside(request, timeout_s=300)
        return path.name, str(outcome.data.get("error_kind")), time.monotonic() - began
    found = interpreter_pass.run(task, request, timeout_s=300)
    verdict = f"OUT OF BOUNDS: {found.failure[:200]}" if found.failure else found.note
    return f"{path.parent.name}/{path.name}", verdict, time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("benchmarks/runs"))
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--per-task", type=int, default=1, help="--compare: kernels a task")
    parser.add_argument("--repeats", type=int, default=3, help="--compare: passes an arm")
    args = parser.parse_args()
    files = sorted(args.runs.glob("*/best_*.py"))
    if not files:
        raise SystemExit(f"no best_*.py under {args.runs}")
    if args.compare:
        compare(files, args.per_task, args.repeats)
        return
    with ThreadPoolExecutor(args.parallel) as pool:
        rows = list(pool.map(one, files))
    for name, verdict, seconds in rows:
        print(f"{seconds:6.1f} s  {name}: {verdict}")
    walls = sorted(s for _, _, s in rows)
    found = sum(v.startswith("OUT OF BOUNDS") for _, v, _ in rows)
    print(f"{len(rows)} kernels, {found} out of bounds; wall per pass median "
          f"{statistics.median(walls):.1f} s [{walls[0]:.1f}, {walls[-1]:.1f}] "
          f"({args.parallel} at once on {__import__('os').cpu_count()} cores)")


def compare(files: list[Path], per_task: int, repeats: int) -> None:
    """Both arms of each kernel, one pass at a time, alternating."""
    chosen: dict[str, list[Path]] = {}
    for path in files:
        chosen.setdefault(path.name, [])
        if len(chosen[path.name]) < per_task:
            chosen[path.name].append(path)
    walls: dict[bool, list[float]] = {False: [], True: []}
    for path in (p for group in chosen.values() for p in group):
        mine: dict[bool, list[float]] = {False: [], True: []}
        for r in range(repeats):
            for arm in ((False, True) if r % 2 == 0 else (True, False)):
                mine[arm].append(one(path, counterfactual=arm)[2])
        for arm in mine:
            walls[arm] += mine[arm]
        print(f"{path.parent.name}/{path.name}: now {statistics.median(mine[False]):.1f} s "
              f"{sorted(round(w, 1) for w in mine[False])}, with the counterfactual "
              f"{statistics.median(mine[True]):.1f} s {sorted(round(w, 1) for w in mine[True])}",
              flush=True)
    now, before = statistics.median(walls[False]), statistics.median(walls[True])
    print(f"{len(walls[False])} passes an arm: now median {now:.1f} s "
          f"[{min(walls[False]):.1f}, {max(walls[False]):.1f}], with the counterfactual "
          f"{before:.1f} s [{min(walls[True]):.1f}, {max(walls[True]):.1f}]: "
          f"{now / before:.2f}x ({__import__('os').cpu_count()} cores)")


if __name__ == "__main__":
    main()
