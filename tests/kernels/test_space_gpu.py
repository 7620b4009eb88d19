"""The spaces of the tasks on the GPU: what every point does there, in one pooled test.

What this proves, on the GPU it runs on:
- attention and matmul (the tiled, staged kernels, whose shared memory is modelled): every
  point the model puts at half the GPU's shared memory per block or more (the boundary,
  where a model error would flip a verdict), in float16, on every edge shape, computes
  the op within the task's tolerances (the output and any input the op writes), or, where
  the model predicts more than the limit, Triton refuses it with OutOfResources on exactly
  those shapes; their naive kernels do it on every sweep shape in every dtype;
- every task, in every dtype, on every edge shape: a covering subset of points (the
  fewest, chosen greedily, in which every value of every knob and variant appears);
- no compiled kernel uses more shared memory than the task's model predicts.
The interpreter tests run every point of every task in every dtype on small shapes on a CPU.

Compiling is the cost (one to a few seconds a kernel, about a thousand kernels), so the
work is spread over a pool of worker processes (spawned: CUDA does not survive a fork) in
small jobs, the costliest first: one per (point, dtype, edge shape) for the covering
subsets, since a job holding a point's three dtypes kept the pool waiting (softmax's naive
point alone took 172 s of a 187 s test on the H200; split, the test takes 57 s). Every
point of the two 80-point spaces took 202 s, so only their boundary points run here.
"""

from __future__ import annotations

import collections
import math
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

import pytest
import torch
from space_points import check_point

from kernelkb.kernels.base import Task
from kernelkb.kernels.discovery import all_tasks

ON_GPU = torch.cuda.is_available()
# a core for each other test process (pytest-xdist's workers, or this one alone)
WORKERS = max(1, min(16, (os.cpu_count() or 2)
                     - int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
EVERY_POINT = ("attention", "matmul")  # their boundary points, in float16, on the edge shapes
BOUNDARY_SHARE = 0.5  # of the GPU's shared memory per block: 55 of their 160 points on the H200


def covering_subset(task: Task, points: list[dict]) -> list[dict]:
    """The fewest points (greedy) in which every value of every knob and variant appears."""
    def pairs(point: dict) -> set:
        return set(point.items())

    uncovered = set().union(*(pairs(p) for p in points))
    chosen = []
    while uncovered:
        best = max(points, key=lambda p: len(pairs(p) & uncovered))
        chosen.append(best)
        uncovered -= pairs(best)
    return chosen


def space_jobs() -> list[tuple[str, dict, tuple[str, ...], str | tuple]]:
    """(task, point, dtypes, shape set) jobs, the costliest first (the sweeps of every
    dtype, then the naive points)."""
    tasks = all_tasks()
    every = [n for n in EVERY_POINT if n in tasks]
    jobs = [(name, tasks[name].default_config, (dtype,), "sweep")
            for name in every for dtype in tasks[name].dtypes]
    covering = []
    for name, task in tasks.items():
        subset = covering_subset(task, list(task.space()))
        dtypes = tuple(d for d in task.dtypes if name not in EVERY_POINT or d != "float16")
        # one job per (point, dtype, shape): softmax's naive point on its edge shapes in three
        # dtypes, as one job, took 172 s of a 187 s pool
        covering += [(name, point, (dtype,), shape) for point in subset for dtype in dtypes
                     for shape in task.edge_shapes]
    # the biggest shapes first: they specialise the biggest blocks, which compile slowest
    jobs += sorted(covering, key=lambda job: -math.prod(job[3]))
    for name in every:
        jobs += [(name, point, ("float16",), "edge") for point in boundary_points(tasks[name])]
    return jobs


def boundary_points(task: Task, share: float = BOUNDARY_SHARE) -> list[dict]:
    """The points whose predicted shared memory on the edge shapes is at least ``share`` of
    this GPU's limit per block (every point without a known limit): where a model error
    would flip run into refused or back. The rest are covered by the covering subset here
    and by every point in the interpreter."""
    from kernelkb.kernels.resources import smem_limit

    limit = smem_limit()
    points = list(task.space())
    if limit is None:
        return points
    return [p for p in points
            if task.smem_need(p, tuple(task.edge_shapes), ("float16",)) >= share * limit]


def test_the_covering_subset_covers_every_value() -> None:
    for task in all_tasks().values():
        points = list(task.space())
        subset = covering_subset(task, points)
        for param in (*task.knobs, *task.variants):
            used = {p[param.name] for p in points}
            assert used == {p[param.name] for p in subset}, (task.name, param.name)
        assert len(subset) < len(points)


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs CUDA")
def test_the_spaces_on_the_gpu() -> None:
    jobs = space_jobs()
    began = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(WORKERS, mp_context=context) as pool:
        results = list(pool.map(check_point, *zip(*jobs, strict=True)))
    problems = [(job[0], p) for job, r in zip(jobs, results, strict=True) for p in r["problems"]]
    refused = sum(r["refused"] for r in results)
    print(f"{len(jobs)} jobs on {WORKERS} workers in {time.perf_counter() - began:.0f} s; "
          f"{refused} (point, shape) refused as predicted (over the GPU's shared memory)")
    costliest = sorted(zip(jobs, results, strict=True), key=lambda jr: -jr[1]["seconds"])
    for (task, point, dtypes, which), r in costliest[:8]:  # where the wall clock goes
        print(f"{r['seconds']:6.1f} s  {task} {which} {','.join(dtypes)} {point}")
    by_task = collections.Counter(task for task, _ in problems)
    shown = [p for task in by_task for p in [p for t, p in problems if t == task][:8]]
    assert not problems, f"problems per task {dict(by_task)}:\n" + "\n".join(shown)
