"""``kernelkb sweep TASK``: the CLI face of ``optimizer.sweep`` (the fast door).

Light at import (argparse only). Every legal configuration of the task's template, per
shape regime, checked in a pool of processes and compared with its parent on the GPU
with the judge's interval; one journal line a point, resumable.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from kernelkb.cli.common import TASK_HELP, Command
from kernelkb.cli.optimize import tasks_dir_flag

if TYPE_CHECKING:
    from kernelkb.optimizer.sweep import Point, SweepPlan

HELP = "measure a task's whole space per regime (generated code: the fast door)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", metavar="TASK", nargs="+",
                        help=TASK_HELP + "; several are measured one after another, the "
                             "next compiling on the host's cores while one is timed")
    tasks_dir_flag(parser)
    parser.add_argument("--dtype", action="append", default=None,
                        help="float16, bfloat16, ... (repeat for several; default float16)")
    parser.add_argument("--regime", action="append", default=None,
                        help="one regime (repeat for several; default every regime)")
    parser.add_argument("--limit", type=int, default=None,
                        help="the first N configurations only (the naive kernel first)")
    parser.add_argument("--shapes", default="sweep",
                        help="the shape set timed per regime: sweep (default), tune, all, cpu")
    parser.add_argument("--workers", type=int, default=None,
                        help="processes that check and compile (default: every core but one)")
    parser.add_argument("--gpus", default=None,
                        help="spread the sweep over GPUs of this host, one worker each: all, "
                             "a count N, or ids such as 0,3 (default: one GPU)")
    parser.add_argument("--ray", default=None, metavar="ADDRESS",
                        help="spread the sweep over a Ray cluster (host:port of its head, or "
                             "auto), a share of the space per GPU; pip install "
                             "\"kernelkb[ray]\" (docs/scale-out.md)")
    parser.add_argument("--shares", type=int, default=None,
                        help="with --ray: shares to cut the space into (default: one per "
                             "GPU of the cluster, one per core without GPUs)")
    parser.add_argument("--configs", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path("sweeps"),
                        help="folder of the journals, one <task>_<dtype>.jsonl each "
                             "(default: sweeps); an existing journal is resumed")


def run(args: argparse.Namespace) -> int:
    from kernelkb.optimizer.sweep import describe, run_sweeps

    try:
        jobs = _plans(args)
        gpus = _gpus(args.gpus)
    except ValueError as err:
        print(f"kernelkb sweep: {err}", file=sys.stderr)
        return 2
    for plan, journal in jobs:
        print(f"{plan.task.name} {plan.dtype}: {len(plan.configs)} configurations x "
              f"{len(plan.regimes)} regimes ({', '.join(plan.regimes)}) = {plan.points} "
              f"points -> {journal}", flush=True)
    began = time.perf_counter()
    if args.ray or len(gpus) > 1:
        for plan, journal in jobs:
            points = _spread(args, plan, journal, gpus)
            if points is None:
                return 2
            _summary(plan, points, began)
            began = time.perf_counter()
        return 0
    # one GPU: the next plan compiles on the host's cores while this one is timed
    for (plan, _), points in zip(jobs, run_sweeps(jobs, workers=args.workers,
                                                  on_point=_Progress(describe)), strict=True):
        _summary(plan, points, began)
        began = time.perf_counter()
    return 0


def _plans(args: argparse.Namespace) -> list[tuple[SweepPlan, Path]]:
    """(plan, journal) for each task x dtype asked, in order; ValueError naming what is
    wrong before anything runs. With several tasks a dtype one of them lacks is skipped
    (said), with one task it is refused."""
    from kernelkb.kernels.discovery import all_tasks, get_task
    from kernelkb.optimizer.sweep import SweepPlan, check_resumable
    from kernelkb.retrieval.names import UnknownName, match_name

    try:
        tasks = [get_task(match_name("task", name, all_tasks())) for name in args.task]
    except UnknownName as err:
        raise ValueError(str(err)) from None
    if args.configs is not None and len(tasks) > 1:
        raise ValueError("--configs names one task's configurations: give one TASK")
    jobs = []
    for task in {t.name: t for t in tasks}.values():
        for dtype in args.dtype or ["float16"]:
            if len(tasks) > 1 and dtype not in task.dtypes:
                print(f"{task.name}: no dtype {dtype}, skipped", flush=True)
                continue
            plan = SweepPlan.of(task.name, dtype, args.regime, args.limit, args.shapes)
            if args.configs is not None:  # a share of the space (a fan-out worker's)
                plan.configs = _configs(task, args.configs)
            journal = args.out / f"{task.name}_{dtype}.jsonl"
            check_resumable(journal)
            jobs.append((plan, journal))
    return jobs


def _spread(args: argparse.Namespace, plan: SweepPlan, journal: Path,
            gpus: list[str]) -> list[Point] | None:
    """One plan over a Ray cluster or this host's GPUs; None where the cluster is not
    reachable (said)."""
    if args.ray:
        from kernelkb.kernels.shared.errors import UserFixable
        from kernelkb.optimizer import ray_cluster

        try:
            cluster = ray_cluster.Cluster.connect(args.ray)
        except UserFixable as err:
            print(f"kernelkb sweep: {err}", file=sys.stderr)
            return None
        print(f"Ray cluster at {args.ray}: {cluster.gpus} GPU(s), {cluster.slots} "
              "measurement(s) at once", flush=True)
        return ray_cluster.sweep(cluster, plan, journal, shapes=args.shapes,
                                 shares=args.shares, workers=args.workers or 1,
                                 on_progress=lambda line: print(line, flush=True))
    from kernelkb.optimizer.fanout import run_fanout

    return run_fanout(plan, journal, gpus, shapes=args.shapes, workers=args.workers,
                      on_progress=lambda line: print(line, flush=True))


def _summary(plan: SweepPlan, points: list[Point], began: float) -> None:
    timed = [p for p in points if p.comparison]
    sure = [p for p in timed if p.comparison and p.comparison.outcome != "neutral"]
    print(f"{plan.task.name} {plan.dtype}: {len(points)} points, {len(timed)} compared with "
          f"their parent ({len(sure)} sure), {sum(not p.ok for p in points)} failed, in "
          f"{time.perf_counter() - began:.0f} s", flush=True)


def _configs(task, path: Path) -> list[dict]:  # type: ignore[no-untyped-def]
    """A JSON list of the task's configurations, each checked legal."""
    import json

    try:
        configs = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"--configs {path}: {err}") from None
    for config in configs:
        reason = task.why_illegal(config)
        if reason or set(config) != {p.name for p in task.params}:
            raise ValueError(f"--configs {path}: not a configuration of {task.name}: {config}")
    return configs


def _gpus(text: str | None) -> list[str]:
    from kernelkb.cli.scale_flags import visible_gpus

    return [] if text is None else visible_gpus(text)


WORKER_HELP = "join this host to a Ray cluster as a measuring worker (docs/scale-out.md)"


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("address", help="the cluster's head, host:port (ray start --head)")
    parser.add_argument("--num-gpus", type=int, default=None,
                        help="GPUs this host offers (default: every visible one)")
    parser.add_argument("--num-cpus", type=int, default=None,
                        help="cores this host offers (default: every core)")


def run_worker(args: argparse.Namespace) -> int:
    """``ray start --address ADDRESS --block``: Ray's own join, with the package present
    (a share runs KernelKB's code on this host, which runs candidates in its jail)."""
    import os
    import shutil

    ray = shutil.which("ray")
    if ray is None:
        print('kernelkb worker: Ray is not installed here: pip install "kernelkb[ray]"',
              file=sys.stderr)
        return 2
    argv = [ray, "start", "--address", args.address, "--block"]
    if args.num_gpus is not None:
        argv += ["--num-gpus", str(args.num_gpus)]
    if args.num_cpus is not None:
        argv += ["--num-cpus", str(args.num_cpus)]
    print(f"joining the Ray cluster at {args.address}: {' '.join(argv[1:])}", flush=True)
    os.execv(ray, argv)
    return 0  # not reached: execv replaced this process



class _Progress:
    """One line a point: how far, how fast (points a second since the first was timed)."""

    def __init__(self, describe) -> None:  # type: ignore[no-untyped-def]
        self.describe, self.began = describe, 0.0
        self.first: int | None = None

    def __call__(self, point, count: int, total: int) -> None:  # type: ignore[no-untyped-def]
        if self.first is None:  # the first point: the rate counts from here
            self.first, self.began = count, time.perf_counter()
        elapsed = time.perf_counter() - self.began
        rate = f"{(count - self.first) / elapsed:.1f}/s" if count > self.first else "-"
        print(f"[{count}/{total} {rate}] {self.describe(point)}", flush=True)


COMMANDS = (Command("sweep", HELP, add_arguments, run),
            Command("worker", WORKER_HELP, add_worker_arguments, run_worker))
