"""Loads and stores past a tensor's end, looked for where the GPU cannot see them.

On a GPU an access past an input's end is silent. The guard regions (guards.py) make a
read there change the answer, unless the kernel throws away what it read: an unmasked
load, then ``tl.where`` on the mask. That passes every check on the GPU, and faults the
day the tensor ends where its allocation does. The CPU interpreter checks every active
address of every load and store against the launch's tensors (bounds.py), so a GPU
evaluation also runs the candidate there once, on the task's small shapes, in its own
jailed worker (no GPU in it), beside the GPU work.

Only an out-of-bounds access counts. Anything else that goes wrong there is the GPU
checks' to judge, and is noted: a kernel the interpreter cannot run (GPU-only features),
one that reads a plain global, or a slow one cut off by its time limit.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kernelkb.kernels.base import Task
from kernelkb.optimizer.sandbox.runner import run_worker_beside

TIMEOUT_S = 120.0  # small shapes: a few seconds normally, the compile included
KIND = "illegal_memory_access"


@dataclass(frozen=True)
class Outcome:
    """What the interpreter's run found: ``failure`` (an out-of-bounds access, with the
    shapes it was on) or a note on why it proves nothing."""

    failure: str | None
    failing_shapes: list[str]
    note: str


def request_for(task: Task, gpu_request: dict[str, Any]) -> dict[str, Any]:
    """The GPU evaluation's request cut to the interpreter's shapes, one seed, no timing,
    no incumbent, no counterfactual call: one checked call a shape, which is where the
    bounds are checked (the GPU worker makes the others)."""
    shapes = [list(s) for s in (*task.cpu_shapes, *task.edge_shapes)]
    return {**gpu_request, "shapes": shapes, "seeds": 1, "timing": False,
            "conditions": False, "bounds_only": True, "parent_timings": {},
            "parent_source": None}


def run(task: Task, gpu_request: dict[str, Any], timeout_s: float = TIMEOUT_S) -> Outcome:
    """Run the candidate in the interpreter and read the result."""
    outcome = run_worker_beside(request_for(task, gpu_request), timeout_s=timeout_s)
    data = outcome.data
    kind = data.get("error_kind")
    if kind == KIND:
        shapes = list(dict.fromkeys(data.get("failing_shapes", [])))
        return Outcome(
            failure=(f"in the Triton interpreter, which checks every access: "
                     f"{data.get('error_message')}. On the GPU such an access reads or "
                     "writes whatever lies past the tensor, silently, until the tensor ends "
                     "where its allocation does"), failing_shapes=shapes,
            note=f"out of bounds on {', '.join(shapes) or 'the import'}")
    if kind is None and data.get("final"):
        return Outcome(None, [], f"every access in bounds on {len(data.get('checked', []))} "
                                 "small shapes")
    return Outcome(None, [], f"not checked ({kind or 'no result'}: "
                             f"{(data.get('error_message') or '')[:200]})")


def start(task: Task, gpu_request: dict[str, Any]) -> tuple[ThreadPoolExecutor, Future[Outcome]]:
    """``run`` on a thread, so it overlaps the GPU evaluation; the caller shuts the pool."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="interpreter-pass")
    return pool, pool.submit(run, task, gpu_request)
