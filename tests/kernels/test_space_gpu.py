"""Every point of every task's space on the GPU, on the task's edge shapes.

What this proves, on the GPU it runs on: every legal point of every task's space, in
float16, either computes the op within the task's tolerances on every edge shape (the
output and any input the op writes) or, where the task's shared-memory model predicts
more than the GPU's limit per block, is refused by Triton with OutOfResources on exactly
those shapes; and no compiled kernel uses more shared memory than the model predicts.
The other dtypes (bfloat16, float32) run a covering subset: the fewest points, chosen
greedily, in which every value of every knob and variant appears. (The interpreter tests
run every point in every dtype on small shapes on a CPU.)

Compiling is the cost (one to a few seconds a kernel, a thousand or more kernels), so the
points are spread over a pool of worker processes (spawned: CUDA does not survive a fork),
the costliest tasks first. One process took over half an hour on the H200.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

import pytest
import torch
from space_points import check_point

from kernels.base import Task, all_tasks

ON_GPU = torch.cuda.is_available()
WORKERS = max(1, min(16, (os.cpu_count() or 2) - 1))
COSTLIEST_FIRST = ("attention", "matmul", "rmsnorm", "softmax", "swiglu", "rope")


def covering_subset(task: Task, points: list[dict]) -> list[dict]:
    """The fewest points (greedy) in which every value of every knob and variant appears."""
    def pairs(point: dict) -> set:
        return {(name, value) for name, value in point.items()}

    uncovered = set().union(*(pairs(p) for p in points))
    chosen = []
    while uncovered:
        best = max(points, key=lambda p: len(pairs(p) & uncovered))
        chosen.append(best)
        uncovered -= pairs(best)
    return chosen


def space_jobs() -> list[tuple[str, dict, tuple[str, ...]]]:
    tasks = all_tasks()
    order = [n for n in COSTLIEST_FIRST if n in tasks] + sorted(set(tasks) - set(COSTLIEST_FIRST))
    jobs = []
    for name in order:
        task = tasks[name]
        points = list(task.space())
        jobs += [(name, point, ("float16",)) for point in points]
        others = tuple(d for d in task.dtypes if d != "float16")
        if others:
            jobs += [(name, point, others) for point in covering_subset(task, points)]
    return jobs


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
def test_every_space_point_on_the_edge_shapes_gpu() -> None:
    jobs = space_jobs()
    began = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(WORKERS, mp_context=context) as pool:
        results = list(pool.map(check_point, *zip(*jobs, strict=True)))
    problems = [p for r in results for p in r["problems"]]
    refused = sum(r["refused"] for r in results)
    print(f"{len(jobs)} point x dtype jobs on {WORKERS} workers in "
          f"{time.perf_counter() - began:.0f} s; {refused} (point, shape) refused as predicted "
          f"(over the GPU's shared memory)")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:25])
