"""Where the seconds of each door into measurement go, on a GPU.

    python benchmarks/profile_doors.py softmax [--judge-repeats 3] [--configs 3]

In this order (the judge first: a run the time limit cuts still has its figure):

1. **The full judge**: the task's naive kernel judged against itself the way the loop
   judges a round (``evaluate(..., parent=, parent_source=)`` on the loop's shapes),
   ``--judge-repeats`` times after one warm-up; per repeat the wall seconds, the worker's
   own laps (load, each shape's check and timing, the comparison), the judge's laps, and
   what is left (process start, jail, imports, CUDA context: the runner's share).
2. **The fast door's timing**: ``--configs`` configurations of the task's space compared
   with their parents on one regime, pairwise and then in shared rounds (as the sweep
   does), under cProfile: seconds per point and the functions that take them.
3. **The fast door's checks**: the same configurations checked in this process, one
   after another, each shape's first call (compile + run) apart from its second call,
   the reference and the comparison of outputs.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import time
from collections import defaultdict

import torch

from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.optimizer import sweep
from kernelkb.optimizer.sandbox import evaluate


def judge_cost(task_name: str, repeats: int) -> None:
    naive = get_task(task_name).template
    parent = evaluate(task_name, naive, shapes="auto", seeds=1)
    print(f"\n== full judge: {task_name} naive vs itself, shapes=auto")
    walls = []
    for i in range(repeats + 1):
        began = time.perf_counter()
        result = evaluate(task_name, naive, shapes="auto", seeds=1, parent=parent,
                          parent_source=naive)
        wall = time.perf_counter() - began
        laps = json.loads(result.artifacts.get("wall_s") or "{}")
        groups: dict[str, float] = defaultdict(float)
        for name, seconds in laps.items():
            groups[name.split(" ")[0]] += seconds
        judge_laps = (result.judge or {}).get("laps_s", {})
        worker = sum(laps.values())
        print(f"repeat {i}{' (warm-up)' if i == 0 else ''}: {wall:.1f} s wall, ok={result.ok} "
              f"{result.error_kind or ''}; worker {worker:.1f} s "
              f"{ {k: round(v, 2) for k, v in groups.items()} }; judge {judge_laps}; "
              f"process {result.wall_s}; the rest {wall - worker - sum(judge_laps.values()):.1f} s")
        if i:
            walls.append(wall)
    print(f"median {statistics.median(walls):.1f} s, range {min(walls):.1f}-{max(walls):.1f}")


def check_cost(task_name: str, dtype: str, configs: list[dict], top: int) -> None:
    from kernelkb.optimizer.sandbox import checks

    task = get_task(task_name)
    plan = sweep.SweepPlan.of(task_name, dtype)
    every, conditioned = sweep._check_shapes(plan)
    tol = task.tolerances[dtype]
    print(f"\n== fast-door checks: {len(configs)} configurations, {len(every)} shapes, "
          f"{len(conditioned)} x {len(task.input_conditions)} conditioned")
    totals: dict[str, float] = defaultdict(float)
    profile = cProfile.Profile()  # where a first call's seconds go (compile: which step)
    for n, config in enumerate(configs):
        print(f"  configuration {n + 1}/{len(configs)} at {sum(totals.values()):.0f} s",
              flush=True)
        began = time.perf_counter()
        module = load_candidate(task.render(config), "profile_point")
        totals["load"] += time.perf_counter() - began
        for shape in every:
            base = task.make_inputs(shape, DTYPES[dtype], 0, "cuda")
            cases = [base] + ([c.apply(base, 0) for c in task.input_conditions]
                              if shape in conditioned else [])
            for n, inputs in enumerate(cases):
                for lap in ("first call", "second call"):
                    began = time.perf_counter()
                    profile.enable()
                    out = module.run(*sweep._fresh(task, inputs))
                    torch.cuda.synchronize()
                    profile.disable()
                    totals[lap if n == 0 else f"condition {lap}"] += time.perf_counter() - began
                began = time.perf_counter()
                ref = task.reference(*sweep._fresh(task, inputs))
                torch.cuda.synchronize()
                totals["reference"] += time.perf_counter() - began
                began = time.perf_counter()
                checks.compare_outputs(out, ref, tol.atol, tol.rtol)
                totals["compare outputs"] += time.perf_counter() - began
    whole = sum(totals.values())
    for name, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {name:24s} {seconds:7.2f} s  {seconds / whole:5.1%}  "
              f"{seconds / len(configs):.2f} s a configuration")
    for order in ("tottime", "cumulative"):
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats(order).print_stats(top)
        print(f"the candidate's calls, by {order}:\n{text.getvalue()}")


def timing_cost(task_name: str, dtype: str, configs: list[dict], top: int) -> None:
    task = get_task(task_name)
    plan = sweep.SweepPlan.of(task_name, dtype)
    regime, shapes = next(iter(plan.regimes.items()))
    timer = sweep._Timer(task, dtype)
    pairs = [(c, step[0]) for c in configs if (step := sweep.parent_of(task, c))]
    print(f"\n== fast-door timing: {len(pairs)} points on regime {regime} ({len(shapes)} shapes)")
    profile = cProfile.Profile()
    seconds = []
    for config, parent in pairs:
        began = time.perf_counter()
        profile.enable()
        result = timer.compare(config, parent, shapes)
        profile.disable()
        seconds.append(time.perf_counter() - began)
        print(f"  {sweep.key(config)}: {seconds[-1]:.2f} s, {result.rounds} rounds, "
              f"compare loop {result.seconds:.2f} s, {result.stopped}")
    print(f"median {statistics.median(seconds):.2f} s a point, pairwise")
    points = [sweep._point(task, dtype, regime, shapes, c, {sweep.key(x): {"ok": True}
                                                           for x in [c, *(p for _, p in pairs)]})
              for c, _ in pairs]
    began = time.perf_counter()
    profile = cProfile.Profile()
    profile.enable()
    timer.time_regime(regime, points, shapes)
    profile.disable()
    spent = time.perf_counter() - began
    print(f"shared rounds: {len(points)} points in {spent:.2f} s "
          f"({len(points) / spent:.1f} points/s, {timer.timed_calls} timed calls)")
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(top)
    print(text.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--judge-repeats", type=int, default=3)
    parser.add_argument("--configs", type=int, default=3,
                        help="configurations for the fast door's checks and timing (each "
                        "compiles every checked shape: 8 took past 490 s on an H100)")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("profile_doors.py times GPU work: run it on a GPU")
    task = get_task(args.task)
    configs = list(task.space())[1:args.configs + 1]
    if args.judge_repeats:  # first: the figure the goal names, whatever cuts the rest
        judge_cost(args.task, args.judge_repeats)
    timing_cost(args.task, args.dtype, configs, args.top)
    check_cost(args.task, args.dtype, configs, args.top)


if __name__ == "__main__":
    main()
