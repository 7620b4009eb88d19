"""The fast door beside Triton's own autotuner: configurations a second, same configurations,
same shapes, each door in a fresh process with a Triton cache of its own (nothing one
compiled is found by the other), alternating door order over repeats. On a GPU.

    python benchmarks/autotune_rate.py --tasks softmax rmsnorm --limit 24 --repeats 2

- **fast door**: ``kernelkb sweep TASK --limit N`` into a scratch journal: every
  configuration checked on every shape and input condition, then compared with its parent
  per regime with a 95% interval (optimizer/sweep.py).
- **autotune**: what ``triton.autotune`` does for each configuration on each shape, in one
  process, one after another: the first call (compile), then Triton's ``do_bench`` with
  the autotuner's defaults (25 ms warm-up, 100 ms of repetitions); no correctness check,
  no interval. A template's structural knobs change its Python wrapper, which
  ``triton.Config`` cannot express, so each configuration is the rendered module and the
  loop is the autotuner's own benchmark loop rather than a ``@triton.autotune`` decorator.

Prints a table (task, door, configurations, seconds, configurations a second, the best
configuration each door finds per regime) and writes it as JSON with ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def autotune_loop(task_name: str, dtype: str, limit: int) -> dict:
    """In this process (its own Triton cache): the autotuner's benchmark loop over the
    sweep's first ``limit`` configurations and every regime's shapes."""
    import torch
    import triton

    from kernelkb.kernels.candidate_loading import load_candidate
    from kernelkb.kernels.discovery import get_task
    from kernelkb.kernels.dtypes import DTYPES
    from kernelkb.optimizer import sweep

    task = get_task(task_name)
    plan = sweep.SweepPlan.of(task_name, dtype, limit=limit)
    began = time.perf_counter()
    best: dict[str, tuple[float, str]] = {}
    for regime, shapes in plan.regimes.items():
        inputs = [task.make_inputs(s, DTYPES[dtype], 0, "cuda") for s in shapes]
        for config in plan.configs:
            module = load_candidate(task.render(config), "autotune_point")
            total = 0.0
            for x in inputs:
                try:
                    module.run(*x)  # the compile the autotuner pays on its first call
                    total += triton.testing.do_bench(lambda m=module, x=x: m.run(*x),
                                                     warmup=25, rep=100)
                except Exception:  # noqa: BLE001 - the autotuner skips a failing config
                    total = float("inf")
                    break
            name = sweep.key(config)
            if total < best.get(regime, (float("inf"), ""))[0]:
                best[regime] = (total, name)
        torch.cuda.synchronize()
    return {"seconds": time.perf_counter() - began, "configs": len(plan.configs),
            "points": plan.points, "best": {r: b[1] for r, b in best.items()}}


def fast_door(task_name: str, dtype: str, limit: int, scratch: Path) -> dict:
    """``kernelkb sweep`` as a user runs it, its own process and Triton cache."""
    out = scratch / "journals"
    env = {**os.environ, "TRITON_CACHE_DIR": str(scratch / "triton")}
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kernelkb", "sweep", task_name, "--dtype",
                           dtype, "--limit", str(limit), "--out", str(out)], env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if done.returncode:
        raise SystemExit(f"sweep failed: {done.stderr[-2000:]}")
    from kernelkb.optimizer import sweep

    _, points = sweep.read_journal(out / f"{task_name}_{dtype}.jsonl")
    compared = [p for p in points.values() if p.comparison]
    return {"seconds": seconds, "configs": limit, "points": len(points),
            "compared": len(compared),
            "sure": sum(p.comparison.outcome.value != "neutral" for p in compared
                        if p.comparison)}


def autotune_door(task_name: str, dtype: str, limit: int, scratch: Path) -> dict:
    env = {**os.environ, "TRITON_CACHE_DIR": str(scratch / "triton")}
    done = subprocess.run([sys.executable, __file__, "--inner", task_name, "--dtype", dtype,
                           "--limit", str(limit)], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"autotune loop failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["softmax", "rmsnorm"])
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--limit", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--inner", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.inner:
        print(json.dumps(autotune_loop(args.inner, args.dtype, args.limit)))
        return
    rows = []
    for task in args.tasks:
        for repeat in range(args.repeats):
            order = [("fast door", fast_door), ("autotune", autotune_door)]
            for door, measure in order if repeat % 2 == 0 else order[::-1]:
                with tempfile.TemporaryDirectory() as scratch:
                    row = {"task": task, "door": door, "repeat": repeat,
                           **measure(task, args.dtype, args.limit, Path(scratch))}
                row["configs_per_s"] = row["configs"] / row["seconds"]
                rows.append(row)
                print(json.dumps(row), flush=True)
    print("\n| task | door | configurations | seconds (median, range) | configurations/s |")
    print("|---|---|---|---|---|")
    for task in args.tasks:
        for door in ("fast door", "autotune"):
            mine = [r for r in rows if r["task"] == task and r["door"] == door]
            secs = [r["seconds"] for r in mine]
            print(f"| {task} | {door} | {mine[0]['configs']} | {statistics.median(secs):.1f} "
                  f"({min(secs):.1f}-{max(secs):.1f}) | "
                  f"{mine[0]['configs'] / statistics.median(secs):.2f} |")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
