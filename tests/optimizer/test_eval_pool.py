"""A round on several GPUs (optimizer/eval_pool.py, Loop._batch_round): one candidate per
slot, each judged against the same incumbent, the fastest that improved taken; a slot
process that dies is measured again once, then a failed measurement, never a verdict.

On this CPU machine the slots of ``LocalGpus`` are real spawned processes with their own
CUDA_VISIBLE_DEVICES, running real evaluations in the interpreter (untimed). What a GPU
would time is played by ``TimedStandIn`` below: every candidate has a fixed speed, and
each evaluation reports the comparison with its parent that a GPU would have measured.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.shared.comparison import Comparison
from kernelkb.optimizer.agents.base import AgentContext, propose_batch
from kernelkb.optimizer.agents.offline import OfflineAgent
from kernelkb.optimizer.agents.tuner import TunerAgent
from kernelkb.optimizer.eval_pool import LOST, LocalGpus
from kernelkb.optimizer.loop import LoopOptions
from kernelkb.optimizer.policy import PolicyConfig
from kernelkb.optimizer.sandbox import EvalResult
from kernelkb.optimizer.session import optimize

TINY = [(4, 64)]
SOFTMAX = get_task("softmax")


def speed(source: str) -> float:
    """A candidate's fixed speed (higher is faster), 1.00-1.49, from its code."""
    return 1.0 + int(hashlib.sha256(source.encode()).hexdigest()[:8], 16) % 50 / 100


class TimedStandIn:
    """A pool of three GPUs whose measurements are the speeds above: an evaluation with a
    parent carries the interval a GPU would have measured around speed(c) / speed(p)."""

    slots, where, on_gpu = 3, "three stand-in GPUs", False

    def __init__(self, runs: Path) -> None:
        self.batches: list[list[str]] = []
        self.runs = runs
        self.live: list[Any] = []  # run.json as the pages read it at each batch

    def slot_names(self, count: int) -> list[str]:
        return [f"stand-in GPU {i}" for i in range(count)]

    def evaluate(self, task: str, source: str, **kwargs: Any) -> EvalResult:
        parent = kwargs.get("parent_source")
        result = EvalResult(ok=True, stage="performance", task_name=task, dtype="float16",
                            shape_set="stand-in", timing_available=True,
                            time_ms=1.0 / speed(source), timings={"rows=4,cols=64": (
                                1.0 / speed(source), 0.0)}, wall_s=1.0)
        if parent is not None:
            ratio = speed(source) / speed(parent)
            result.comparison = Comparison(ratio=ratio, low=ratio * 0.995, high=ratio * 1.005,
                                           rounds=8, calls_per_round=5, noise_floor=0.01,
                                           seconds=1.0, stopped="narrow")
        return result

    def evaluate_many(self, jobs: list[tuple[str, str, dict[str, Any]]]) -> list[EvalResult]:
        self.batches.append([source for _, source, _ in jobs])
        self.live.append(json.loads(next(self.runs.glob("*/run.json")).read_text()))
        return [self.evaluate(task, source, **kwargs) for task, source, kwargs in jobs]

    def call(self, function: Any, *args: Any) -> Any:
        return function(*args)

    def close(self) -> None:
        pass


def test_a_round_measures_a_candidate_per_gpu_and_keeps_the_fastest(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kernelkb.progress")
    pool = TimedStandIn(tmp_path)
    result = optimize("softmax", OfflineAgent(epsilon=0.0), out_dir=tmp_path, knowledge=None,
                      policy=PolicyConfig(max_iters=6, patience=6), measure_baseline=False,
                      options=LoopOptions(shapes=TINY, sweep_shapes=TINY, seeds=1,
                                          retrieval=False, peers=False), pool=pool)
    assert [len(b) for b in pool.batches] == [3, 3]  # six rounds, three at a time
    rounds = [r for r in result.records if r.provenance.round_kind not in ("baseline", "sweep")]
    assert [r.iteration for r in rounds] == [1, 2, 3, 4, 5, 6]
    assert len({r.edit.child_hash for r in rounds}) == 6  # six different candidates
    incumbent = result.start_source
    for batch, records in zip(pool.batches, (rounds[:3], rounds[3:]), strict=True):
        for source, record in zip(batch, records, strict=True):
            # each verdict is against the batch's incumbent, not against a batch-mate
            assert record.edit.parent_hash == records[0].edit.parent_hash
            ratio = speed(source) / speed(incumbent)
            assert record.feedback.comparison.ratio == pytest.approx(ratio)
            expected = "improved" if ratio * 0.995 > 1.01 else \
                "regressed" if ratio * 1.005 < 1 / 1.01 else "neutral"
            assert record.verdict.value == expected
        improved = [s for s in batch if speed(s) * 0.995 > speed(incumbent) * 1.01]
        if improved:
            incumbent = max(improved, key=speed)
    assert result.best_source == incumbent
    said = [r.getMessage() for r in caplog.records if r.name == "kernelkb.progress"]
    for record in rounds:  # a line per GPU as its candidate starts
        where = f"stand-in GPU {(record.iteration - 1) % 3}"
        assert f"{where}: round {record.iteration}: {record.edit.summary[:40]}" in \
            "\n".join(said)
    for live, records in zip(pool.live, (rounds[:3], rounds[3:]), strict=True):
        slots = live["candidate"]["slots"]  # the live page's table of GPUs
        assert [s["where"] for s in slots] == [f"stand-in GPU {i}" for i in range(3)]
        assert [s["iteration"] for s in slots] == [r.iteration for r in records]
        assert [s["summary"][:60] for s in slots] == [r.edit.summary[:60] for r in records]
    assert sum(o.improved for o in result.rounds) <= 2  # at most one new best a batch


def test_a_batch_is_distinct_and_smaller_when_the_agent_runs_out() -> None:
    context = AgentContext(task=SOFTMAX, dtype="float16", iteration=1, round_kind="exploit",
                           best_source=SOFTMAX.template)
    moves = propose_batch(OfflineAgent(epsilon=0.0), context, 4)
    assert len(moves) == 4 and len({m.source for m in moves}) == 4
    assert context.tried_hashes == set()  # the caller's context is not changed
    tuner = TunerAgent()
    configs = propose_batch(tuner, context, 3)
    assert len({c.source for c in configs}) == 3
    for proposal in configs:  # each is observed by its own code, in any order
        tuner.observe(proposal, 1.0, "neutral")
    assert len(tuner.observations) == 3


@pytest.mark.slow
def test_local_gpus_run_real_evaluations_and_survive_a_dying_slot() -> None:
    pool = LocalGpus(["0", "1"])
    try:
        assert pool.call(os.getenv, "CUDA_VISIBLE_DEVICES") == "0"
        job = ("softmax", SOFTMAX.template, {"shapes": TINY, "seeds": 1, "timeout_s": 120})
        first = pool.evaluate_many([job, job])
        assert [r.ok for r in first] == [True, True], [r.error_message for r in first]

        killer = _Killer(pool, "1", times=1)
        again = pool.evaluate_many([job, job])  # slot 1 dies once: measured again
        killer.join()
        assert killer.killed == 1 and [r.ok for r in again] == [True, True]

        killer = _Killer(pool, "1", times=2)
        lost = pool.evaluate_many([job, job])  # dies twice: failed, not a verdict
        killer.join()
        assert killer.killed == 2
        assert lost[0].ok and not lost[1].ok and lost[1].error_kind == LOST
    finally:
        pool.close()


class _Killer(threading.Thread):
    """Kills slot ``gpu``'s process ``times`` times, each soon after it is started."""

    def __init__(self, pool: LocalGpus, gpu: str, times: int) -> None:
        super().__init__(daemon=True)
        self.pool, self.gpu, self.times, self.killed = pool, gpu, times, 0
        self.start()

    def run(self) -> None:
        seen: set[int] = set()
        deadline = time.monotonic() + 120
        while self.killed < self.times and time.monotonic() < deadline:
            processes = getattr(self.pool._executors[self.gpu], "_processes", None) or {}
            fresh = [p for p in processes if p not in seen]
            if fresh:
                time.sleep(0.5)  # inside the job: starting its evaluation
                seen.update(fresh)
                for pid in fresh:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    self.killed += 1
            time.sleep(0.05)
