"""Measurements placed on a Ray cluster (``--ray ADDRESS``): many GPUs, many hosts.

Why Ray and not a scheduler of our own: placement by resource (a task asks for one GPU
and runs where one is free), re-execution when a worker process or a host dies, and
``ray start`` to join a host, are what Ray already does well. What stays ours:

- **Each measurement runs whole on one worker host**: a sweep share (configurations
  checked and timed in shared rounds on that host's GPU) or one evaluation (the full
  judge, in its jail on that host). A verdict is a comparison made on one GPU, never a
  figure of one card against another's: the journal and the result carry the GPU that
  measured them.
- **Faults**: Ray runs a task again once when its worker or host died
  (``max_retries=1``); a share or an evaluation lost twice comes back as a failed
  measurement (``worker_died``), never as a verdict on the kernel. A share delivered
  twice is merged once: every point has an id (task, dtype, regime, configuration).
- **Trust**: Ray runs whatever a connected driver submits, as the worker's user, with
  no authentication of its own. The cluster's address must be loopback or a private
  network of hosts you trust (docs/scale-out.md); the candidate's code still runs only in
  the jail of the host that measures it.

``ray`` is an optional dependency: ``pip install "kernelkb[ray]"``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelkb.kernels.shared.errors import UserFixable
from kernelkb.optimizer.eval_pool import LOST, lost_result
from kernelkb.optimizer.sweep import (
    Point,
    SweepPlan,
    measured,
    merge_points,
    point_id,
    run_sweep,
)

log = logging.getLogger(__name__)

POLL_S = 2.0


class RayMissing(UserFixable):
    """Ray is not installed where ``--ray`` was asked for."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayMissing("--ray needs Ray: pip install \"kernelkb[ray]\"") from None
    return ray


@dataclass
class Cluster:
    """A connection to a running Ray cluster and how a measurement asks for a slot."""

    address: str
    gpus: int  # GPUs the cluster offers (0: the CPU interpreter, a core a slot)
    slots: int  # measurements that can run at once

    @classmethod
    def connect(cls, address: str) -> Cluster:
        ray = _ray()
        if not ray.is_initialized():
            try:
                ray.init(address=address, logging_level=logging.WARNING,
                         log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as err:
                raise UserFixable(
                    f"--ray {address}: no Ray cluster answers there ({err}); start one with "
                    "`ray start --head`. If the cluster asks for Ray's token (recent Ray "
                    "turns token authentication on for clusters `ray start` makes), set "
                    "RAY_AUTH_MODE=token here, with the head's ~/.ray/auth_token copied "
                    "to this host (docs/scale-out.md)") from None
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        return cls(address, gpus, gpus or int(resources.get("CPU", 1)))

    @property
    def resources(self) -> dict[str, Any]:
        return {"num_gpus": 1} if self.gpus else {"num_cpus": 1}


def _lost_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's errors for a task whose process or host died (not one the task raised)."""
    names = ("WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OwnerDiedError",
             "LocalRayletDiedError", "TaskUnschedulableError")
    return tuple(getattr(ray.exceptions, n) for n in names if hasattr(ray.exceptions, n))


# -- a user's own tasks travel with the work -------------------------------------------
SHIPPED_MAX_BYTES = 2 << 20  # a tasks folder bigger than this is installed on each host
Shipped = list[tuple[str, dict[str, str]]]  # (task file, its folder's .py files by path)


def folder_tasks() -> Shipped:
    """Every task loaded here from a tasks folder (``--tasks-dir``): the task's file and
    the Python files of its folder (its templates), by relative path. A worker host has
    not got the user's folder, so they go with each job. Tasks from installed packages
    must be installed on every host."""
    from kernelkb.kernels.discovery import all_tasks, origin_of
    from kernelkb.kernels.shared.errors import UserFixable

    shipped: dict[str, tuple[str, dict[str, str]]] = {}
    for name in all_tasks():
        origin = origin_of(name)
        if origin is None or origin.kind != "folder" or origin.file in shipped:
            continue
        root = Path(origin.file).parent
        files = {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.py"))
                 if "__pycache__" not in p.parts}
        if sum(len(t) for t in files.values()) > SHIPPED_MAX_BYTES:
            raise UserFixable(f"tasks folder {root}: over {SHIPPED_MAX_BYTES >> 20} MiB of "
                              "Python to send with each job; install it on every host of "
                              "the cluster as a package (an entry point) instead")
        shipped[origin.file] = (Path(origin.file).name, files)
    return list(shipped.values())


def _receive(shipped: Shipped) -> None:
    """On a worker host: the driver's task folders, written once under a folder named by
    their content, and their task files loaded."""
    import hashlib

    from kernelkb.kernels.discovery import load_file

    for task_file, files in shipped:
        digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
        root = Path(tempfile.gettempdir()) / "kernelkb_tasks_shipped" / digest[:16]
        for relative, text in files.items():
            path = (root / relative).resolve()
            if root.resolve() not in path.parents:
                raise ValueError(f"a shipped task file outside its folder: {relative}")
            if not path.is_file():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
        load_file(root / task_file)


def _with_tasks(files: Shipped, function: Callable[..., Any], *args: Any) -> Any:
    _receive(files)
    return function(*args)


# -- a sweep, in shares --------------------------------------------------------------
def _measure_share(task: str, dtype: str, regimes: list[str], shapes: str,
                   configs: list[dict[str, Any]], workers: int, share: int,
                   progress: Any, files: Shipped) -> tuple[dict[str, Any], list[str]]:
    """On a worker host: one share of a sweep into a journal of its own; returns the
    journal's header and point lines."""
    import socket

    _receive(files)

    plan = SweepPlan.of(task, dtype, regimes, shapes=shapes)
    plan.configs = configs
    host = socket.gethostname()

    def reported(point: Point, count: int, total: int) -> None:
        progress.report.remote(share, host, count, total)

    with tempfile.TemporaryDirectory(prefix="kernelkb_share_") as folder:
        journal = Path(folder) / "share.jsonl"
        run_sweep(plan, journal, workers=workers, on_point=reported)
        lines = journal.read_text().splitlines()
    header, points = {}, []
    for line in lines:
        if line.startswith('{"header"'):
            header = json.loads(line)["header"]
        elif line.strip():
            points.append(line)
    return header, points


class _Progress:
    """A Ray actor the shares report to: (host, points done, points) per share."""

    def __init__(self) -> None:
        self.shares: dict[int, tuple[str, int, int, float]] = {}
        self.began = time.monotonic()

    def report(self, share: int, host: str, done: int, total: int) -> None:
        self.shares[share] = (host, done, total, time.monotonic() - self.began)

    def read(self) -> dict[int, tuple[str, int, int, float]]:
        return dict(self.shares)


def sweep(cluster: Cluster, plan: SweepPlan, journal: Path, *, shapes: str = "sweep",
          shares: int | None = None, workers: int = 1,
          on_progress: Callable[[str], None] = print) -> list[Point]:
    """Measure ``plan`` on the cluster, a share of its configurations per slot (or
    ``shares``), into ``journal``: every point of the plan, once."""
    ray = _ray()
    header, done = measured(journal, plan.task)  # stale points measured again
    todo = [c for c in plan.configs
            if any(_pid(plan, r, c) not in done for r in plan.regimes)]
    count = max(1, min(len(todo), shares or cluster.slots))
    parts = [todo[i::count] for i in range(count)]
    remote = ray.remote(max_retries=1, **cluster.resources)(_measure_share)
    progress = _progress_actor(ray)
    shown: dict[int, tuple[str, int, int, float]] = {}
    files = folder_tasks()
    futures = {remote.remote(plan.task.name, plan.dtype, list(plan.regimes), shapes, part,
                             workers, i, progress, files): i
               for i, part in enumerate(parts) if part}
    lost: list[int] = []
    pending = list(futures)
    while pending:
        with _cancelled_on_interrupt(ray, pending):
            ready, pending = ray.wait(pending, num_returns=1, timeout=POLL_S)
        shown = _read_progress(ray, progress, shown)
        on_progress(_line(shown, parts, len(plan.regimes)))
        for future in ready:
            try:
                part_header, lines = ray.get(future)
            except _lost_errors(ray) as err:  # its worker or host died twice
                log.warning("share %d lost: %s", futures[future], str(err)[:300])
                lost.append(futures[future])
                continue
            header = merge_points(journal, header, part_header,
                                  [Point.from_row(json.loads(line)) for line in lines], done)
    lost_points = [Point(plan.task.name, plan.dtype, regime, config, None, None, ok=False,
                         error_kind=LOST, error_message="the share measuring this point "
                         "was lost twice (a worker or host died)")
                   for i in lost for config in parts[i] for regime in plan.regimes]
    header = merge_points(journal, header, {}, lost_points, done)  # failed, not verdicts
    return list(done.values())


def _progress_actor(ray: Any) -> Any:
    """The actor the shares report to, on the driver's own node where it is one of the
    cluster's (soft: anywhere else if not), so a worker host that dies takes no progress
    with it."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    return ray.remote(num_cpus=0, scheduling_strategy=here)(_Progress).remote()


def _read_progress(ray: Any, progress: Any, last: dict[int, tuple[str, int, int, float]]
                   ) -> dict[int, tuple[str, int, int, float]]:
    """The shares' latest reports; the last ones read where the actor went with its
    host (the progress line stops, the sweep goes on: its results come from the shares)."""
    try:
        return dict(ray.get(progress.read.remote(), timeout=10 * POLL_S))
    except (*_lost_errors(ray), ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
        return last


@contextlib.contextmanager
def _cancelled_on_interrupt(ray: Any, pending: list[Any]) -> Iterator[None]:
    """Ctrl-C (or SIGTERM from a time limit) in the driver stops the measurements it
    placed: each pending task is cancelled, its process killed."""
    try:
        yield
    except KeyboardInterrupt:
        for future in pending:
            ray.cancel(future, force=True)
        raise


def _line(shares: dict[int, tuple[str, int, int, float]], parts: list[list[Any]],
          regimes: int) -> str:
    """One line: each running share's host, points done and rate."""
    cells = []
    for i, part in enumerate(parts):
        host, got, total, spent = shares.get(i, ("waiting", 0, len(part) * regimes, 0.0))
        rate = f" {got / spent:.1f}/s" if spent > 0 and got else ""
        cells.append(f"share {i} @{host}: {got}/{total}{rate}")
    return " | ".join(cells)


def _pid(plan: SweepPlan, regime: str, config: dict[str, Any]) -> str:
    return point_id(plan.task.name, plan.dtype, regime, config)


# -- single evaluations (revalidate, an agent's batch) ---------------------------------
def _evaluate_remote(task: str, source: str, kwargs: dict[str, Any], files: Shipped) -> Any:
    from kernelkb.optimizer.sandbox import evaluate

    _receive(files)
    return evaluate(task, source, **kwargs)


def evaluate_many(cluster: Cluster, jobs: list[tuple[str, str, dict[str, Any]]],
                  on_done: Callable[[int, Any], None] | None = None) -> list[Any]:
    """``evaluate(task, source, **kwargs)`` for each job, each on a slot of the cluster;
    results in the jobs' order. A job lost twice is an EvalResult failed ``worker_died``."""
    ray = _ray()
    remote = ray.remote(max_retries=1, **cluster.resources)(_evaluate_remote)
    files = folder_tasks()
    futures = [remote.remote(task, source, kwargs, files) for task, source, kwargs in jobs]
    results: list[Any] = [None] * len(jobs)
    index = {f: i for i, f in enumerate(futures)}
    pending = list(futures)
    while pending:
        with _cancelled_on_interrupt(ray, pending):
            ready, pending = ray.wait(pending, num_returns=1)
        for future in ready:
            i = index[future]
            task, _, kwargs = jobs[i]
            try:
                results[i] = ray.get(future)
            except _lost_errors(ray) as err:
                results[i] = lost_result(task, kwargs, f"lost twice on the cluster: {err}")
            if on_done:
                on_done(i, results[i])
    return results


def call(cluster: Cluster, function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` on a slot of the cluster (where the measuring happens: the
    GPU's environment, the PyTorch baseline, the peaks), its result back."""
    ray = _ray()
    remote = ray.remote(max_retries=1, **cluster.resources)(_with_tasks)
    return ray.get(remote.remote(folder_tasks(), function, *args))
