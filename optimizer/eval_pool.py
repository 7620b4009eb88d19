"""Where a run's evaluations happen when it has more than one GPU: ``--gpus`` (one pinned
process per GPU of this host) or ``--ray ADDRESS`` (a slot of a Ray cluster).

Why: every candidate of a round is an independent measurement, so a round on eight GPUs
can try eight edits in the time of one. What must not change is the verdict: each
candidate is timed against the incumbent inside its own evaluation, interleaved on the
GPU that measures it (compare.py), so no figure of one card is ever compared with
another's. Both pools offer the same three things to the loop and the session:

- ``evaluate(task, source, **kwargs)``: one evaluation (a baseline round, a final sweep);
- ``evaluate_many(jobs)``: a round's candidates at once, one per slot, results in order;
- ``call(function, *args)``: a function run where the measuring happens (the GPU's
  environment, the PyTorch baseline, the peaks, the peers), not on the driver.

Faults: a slot whose process dies mid-evaluation gets its job once more on a fresh
process; a job lost twice comes back as a failed measurement (``worker_died``), never as
a verdict on the kernel.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

log = logging.getLogger(__name__)
LOST = "worker_died"
Job = tuple[str, str, dict[str, Any]]  # (task, source, evaluate's keyword arguments)


class EvalPool(Protocol):
    slots: int  # evaluations that can run at once
    on_gpu: bool  # the evaluations are timed on GPUs (False: the CPU interpreter)
    where: str  # for the progress line: "GPUs 0,1" or "Ray cluster at ADDRESS"

    def evaluate(self, task: str, source: str, **kwargs: Any) -> Any: ...

    def slot_names(self, count: int) -> list[str]:
        """Where the jobs of a batch of ``count`` run, in order (for the live page)."""
        ...

    def evaluate_many(self, jobs: list[Job]) -> list[Any]: ...

    def call(self, function: Callable[..., Any], *args: Any) -> Any: ...

    def close(self) -> None: ...


def lost_result(task: str, kwargs: dict[str, Any], why: str) -> Any:
    """A measurement that did not happen: failed, never a verdict on the kernel."""
    from kernelkb.optimizer.sandbox.result import EvalResult

    return EvalResult(ok=False, stage="run", task_name=task,
                      dtype=kwargs.get("dtype", "float16"), shape_set=str(kwargs.get("shapes")),
                      error_kind=LOST, error_message=why[:400])


# -- the GPUs of this host ---------------------------------------------------------------
def _pin(gpu: str, tasks_dirs: list[str]) -> None:
    """A slot process's start, before torch is imported: it sees its GPU alone (so the
    GPU-turn lock, the jail's device and the environment are that GPU's) and the user's
    task folders."""
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    if tasks_dirs:
        from kernelkb.kernels.discovery import add_tasks_dirs

        add_tasks_dirs(tasks_dirs)


def _evaluate(task: str, source: str, kwargs: dict[str, Any]) -> Any:
    from kernelkb.optimizer.sandbox import evaluate

    return evaluate(task, source, **kwargs)


class LocalGpus:
    """One process per GPU id, pinned by ``CUDA_VISIBLE_DEVICES`` (spawned, so no CUDA
    state crosses from the driver); the i-th job of a batch goes to the i-th GPU."""

    def __init__(self, gpus: list[str]) -> None:
        from kernelkb.kernels.discovery import tasks_dirs

        if not gpus:
            raise ValueError("a pool needs at least one GPU")
        self.gpus = list(gpus)
        self.slots = len(self.gpus)
        self.on_gpu = True  # ids of this host's visible GPUs (kernelkb/cli/scale_flags.py)
        self.where = f"GPU{'s' if len(gpus) > 1 else ''} {','.join(self.gpus)}"
        self._tasks_dirs = [str(p) for p in tasks_dirs()]
        self._context = multiprocessing.get_context("spawn")
        self._executors = {gpu: self._start(gpu) for gpu in self.gpus}

    def _start(self, gpu: str) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=1, mp_context=self._context,
                                   initializer=_pin, initargs=(gpu, self._tasks_dirs))

    def evaluate(self, task: str, source: str, **kwargs: Any) -> Any:
        return self.evaluate_many([(task, source, kwargs)])[0]

    def slot_names(self, count: int) -> list[str]:
        return [f"GPU {self.gpus[i % self.slots]}" for i in range(count)]

    def evaluate_many(self, jobs: list[Job]) -> list[Any]:
        submitted = [(self.gpus[i % self.slots], job) for i, job in enumerate(jobs)]
        futures = [self._executors[gpu].submit(_evaluate, *job) for gpu, job in submitted]
        return [self._outcome(gpu, job, future) for (gpu, job), future
                in zip(submitted, futures, strict=True)]

    def _outcome(self, gpu: str, job: Job, future: Future[Any]) -> Any:
        for attempt in (1, 2):
            try:
                return future.result()
            except BrokenProcessPool as err:
                log.warning("the process measuring on GPU %s died (%s)%s", gpu, err,
                            ": measuring the job again" if attempt == 1 else "")
                self._executors[gpu].shutdown(wait=False, cancel_futures=True)
                self._executors[gpu] = self._start(gpu)
                if attempt == 1:
                    future = self._executors[gpu].submit(_evaluate, *job)
        return lost_result(job[0], job[2], f"the process measuring on GPU {gpu} died twice")

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return self._executors[self.gpus[0]].submit(function, *args).result()

    def close(self) -> None:
        for executor in self._executors.values():
            # Ctrl-C: a slot still measuring stops too (Python 3.14 has kill_workers())
            processes = list((getattr(executor, "_processes", None) or {}).values())
            executor.shutdown(wait=False, cancel_futures=True)
            for process in processes:
                if process.is_alive():
                    process.kill()


# -- a Ray cluster ---------------------------------------------------------------------
class RayPool:
    """Each job a Ray task asking for one GPU (a core on a cluster of CPUs), placed where
    one is free; optimizer/ray_cluster.py holds the connection and the fault rules."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.slots = cluster.slots
        self.on_gpu = cluster.gpus > 0
        self.where = f"Ray cluster at {cluster.address} ({cluster.slots} slots)"

    def evaluate(self, task: str, source: str, **kwargs: Any) -> Any:
        return self.evaluate_many([(task, source, kwargs)])[0]

    def slot_names(self, count: int) -> list[str]:
        return [f"Ray slot {i + 1} of {self.slots}" for i in range(count)]

    def evaluate_many(self, jobs: list[Job]) -> list[Any]:
        from kernelkb.optimizer import ray_cluster

        return ray_cluster.evaluate_many(self.cluster, jobs)

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        from kernelkb.optimizer import ray_cluster

        return ray_cluster.call(self.cluster, function, *args)

    def close(self) -> None:
        """The cluster outlives the run: nothing of ours to stop."""
