"""A sweep spread over the GPUs of one host: one ``kernelkb sweep`` worker per GPU.

Why: every point of a space is an independent measurement, and a host of eight GPUs
measured one at a time is a host of one GPU. Each worker is a process of its own pinned
to its GPU (``CUDA_VISIBLE_DEVICES``), with its share of the configurations (round robin,
so every GPU gets cheap and dear ones) and of the host's cores for its checks; a point's
verdict is a comparison made on one GPU (the configuration against its parent,
interleaved there), so no figure of one card is compared with another's. A different
card model on the same host is a different GPU to the store: each worker's journal
header carries its own GPU.

Workers write journals of their own beside the sweep's; this process follows them (one
progress line a GPU), then merges their points into the sweep's journal, each point once.
A worker that dies has its unmeasured configurations measured again once by a new worker;
a configuration that loses a second worker is journaled as a failed measurement, never
as a verdict on it. Ctrl-C ends every worker.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelkb.optimizer.eval_pool import LOST
from kernelkb.optimizer.sweep import (
    Point,
    SweepPlan,
    measured,
    merge_points,
    point_id,
    read_journal,
)

POLL_S = 2.0


def parse_gpus(text: str, visible: int) -> list[str]:
    """``all`` (every visible GPU), a count ``N`` (the first N) or ids ``0,3``."""
    text = text.strip()
    if text == "all":
        return [str(i) for i in range(visible)]
    if text.isdigit():
        count = int(text)
        if count < 1 or count > visible:
            raise ValueError(f"--gpus {count}: this host shows {visible} GPU(s)")
        return [str(i) for i in range(count)]
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids or not all(i.isdigit() for i in ids) or len(set(ids)) != len(ids):
        raise ValueError(f"--gpus {text!r}: all, a count, or distinct ids such as 0,3")
    return ids


def pinned(gpu: str) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` value that shows a child GPU ``gpu`` of this process
    alone: ids count this process's visible GPUs, so under CUDA_VISIBLE_DEVICES=2,3 the id
    0 is the host's GPU 2 (or its UUID, as given)."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
               if v.strip()]
    return visible[int(gpu)] if visible and int(gpu) < len(visible) else gpu


@dataclass
class Worker:
    gpu: str
    configs: list[dict[str, Any]]
    folder: Path
    process: subprocess.Popen[bytes]
    started: float

    @property
    def journal(self) -> Path:
        return next(iter(self.folder.glob("*.jsonl")), self.folder / "none.jsonl")

    def points(self) -> int:
        try:
            return max(0, len(self.journal.read_text().splitlines()) - 1)
        except OSError:
            return 0


def run_fanout(plan: SweepPlan, journal: Path, gpus: list[str], *, shapes: str = "sweep",
               workers: int | None = None, on_progress: Callable[[str], None] = print
               ) -> list[Point]:
    """Measure ``plan`` on ``gpus`` (one worker each) into ``journal``; every point of the
    plan, once."""
    header, done = measured(journal, plan.task)  # stale points measured again
    todo = [c for c in plan.configs if any(_pid(plan, r, c) not in done for r in plan.regimes)]
    cores = workers or max(1, (os.cpu_count() or 2) - len(gpus))
    per_worker = max(1, cores // len(gpus))
    parts = journal.parent / f".{journal.stem}.parts"
    for attempt in (1, 2):
        if not todo:
            break
        shares = [todo[i::len(gpus)] for i in range(len(gpus))]
        running = [_start(plan, gpu, share, parts / f"try{attempt}-gpu{gpu}", shapes,
                          per_worker) for gpu, share in zip(gpus, shares, strict=False) if share]
        try:
            _follow(running, plan, on_progress)
        except BaseException:
            for worker in running:
                _stop(worker)
            raise
        for worker in running:
            header = _merge(worker.journal, journal, header, done)
        todo = [c for c in plan.configs
                if any(_pid(plan, r, c) not in done for r in plan.regimes)]
        lost = [w.gpu for w in running if w.process.returncode != 0]
        if todo and lost:
            on_progress(f"worker(s) on GPU {', '.join(lost)} ended early: {len(todo)} "
                        f"configuration(s) {'measured again' if attempt == 1 else 'failed'}")
    # lost twice: a failed measurement, not a verdict on the kernel
    merge_points(journal, header, {}, [
        Point(plan.task.name, plan.dtype, regime, config, None, None, ok=False,
              error_kind=LOST,
              error_message="two measuring workers ended before this point")
        for config in todo for regime in plan.regimes], done)
    if not todo:  # every point is in the sweep's journal: the workers' folders go
        shutil.rmtree(parts, ignore_errors=True)
    return [p for p in done.values()]


def _pid(plan: SweepPlan, regime: str, config: dict[str, Any]) -> str:
    return point_id(plan.task.name, plan.dtype, regime, config)


def _start(plan: SweepPlan, gpu: str, share: list[dict[str, Any]], folder: Path,
           shapes: str, workers: int) -> Worker:
    folder.mkdir(parents=True, exist_ok=True)
    configs = folder / "configs.json"
    configs.write_text(json.dumps(share))
    argv = [sys.executable, "-m", "kernelkb", "sweep", plan.task.name, "--dtype", plan.dtype,
            "--configs", str(configs), "--shapes", shapes, "--workers", str(workers),
            "--out", str(folder)]
    for regime in plan.regimes:
        argv += ["--regime", regime]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": pinned(gpu)}
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                               stderr=open(folder / "worker.log", "wb"),  # noqa: SIM115
                               start_new_session=True)
    return Worker(gpu, share, folder, process, time.monotonic())


def _follow(running: list[Worker], plan: SweepPlan, say: Callable[[str], None]) -> None:
    """Until every worker has ended: one line, each GPU's points and rate."""
    total = {w.gpu: len(w.configs) * len(plan.regimes) for w in running}
    while any(w.process.poll() is None for w in running):
        time.sleep(POLL_S)
        say(" | ".join(_line(w, total[w.gpu]) for w in running))
    say(" | ".join(_line(w, total[w.gpu]) for w in running))


def _line(worker: Worker, total: int) -> str:
    done = worker.points()
    rate = done / max(1e-9, time.monotonic() - worker.started)
    state = "" if worker.process.poll() is None else (
        " done" if worker.process.returncode == 0 else f" ended ({worker.process.returncode})")
    return f"GPU {worker.gpu}: {done}/{total} {rate:.1f}/s{state}"


def _stop(worker: Worker) -> None:
    try:
        os.killpg(worker.process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    worker.process.wait()


def _merge(part: Path, journal: Path, header: dict[str, Any], done: dict[str, Point]
           ) -> dict[str, Any]:
    """A worker's journal into the sweep's (sweep.merge_points)."""
    part_header, points = read_journal(part)
    return merge_points(journal, header, part_header, points.values(), done)
