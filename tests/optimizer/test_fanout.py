"""A sweep spread over GPUs (optimizer/fanout.py), on the CPU: two workers, each pinned
to its "GPU" by CUDA_VISIBLE_DEVICES (none here, so each checks under the interpreter),
share the space and the sweep's journal gets every point once; a worker killed mid-run
has its configurations measured again by a new one, nothing doubled."""

from __future__ import annotations

import os
import signal

import pytest

from kernelkb.optimizer import fanout, sweep

pytestmark = pytest.mark.slow


def _plan(limit: int) -> sweep.SweepPlan:
    return sweep.SweepPlan.of("rmsnorm", "float16", limit=limit, shapes="cpu")


def test_parse_gpus():
    assert fanout.parse_gpus("all", 4) == ["0", "1", "2", "3"]
    assert fanout.parse_gpus("2", 4) == ["0", "1"] and fanout.parse_gpus("0,3", 4) == ["0", "3"]
    for bad in ("5", "0,0", "x", "0", ""):
        with pytest.raises(ValueError):
            fanout.parse_gpus(bad, 4)


def test_two_workers_share_the_space_and_the_journal_holds_each_point_once(tmp_path):
    plan = _plan(limit=5)
    lines: list[str] = []
    points = fanout.run_fanout(plan, tmp_path / "rmsnorm_float16.jsonl", ["0", "1"],
                               shapes="cpu", workers=2, on_progress=lines.append)
    assert len(points) == plan.points and all(p.ok for p in points)
    header, done = sweep.read_journal(tmp_path / "rmsnorm_float16.jsonl")
    assert header["task"] == "rmsnorm" and len(done) == plan.points
    assert "GPU 0:" in lines[-1] and "GPU 1:" in lines[-1] and lines[-1].count("done") == 2
    assert not (tmp_path / ".rmsnorm_float16.parts").exists()


def test_a_killed_worker_is_replaced_and_nothing_is_lost_or_doubled(tmp_path):
    plan = _plan(limit=6)
    killed: list[int] = []

    def kill_gpu0(line: str) -> None:
        if killed:
            return
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
            except OSError:
                continue
            if b"try1-gpu0" in cmdline and b"sweep" in cmdline:
                os.killpg(int(pid), signal.SIGKILL)
                killed.append(int(pid))

    journal = tmp_path / "rmsnorm_float16.jsonl"
    points = fanout.run_fanout(plan, journal, ["0", "1"], shapes="cpu", workers=2,
                               on_progress=kill_gpu0)
    assert killed
    _, done = sweep.read_journal(journal)
    lines = [line for line in journal.read_text().splitlines() if '"header"' not in line]
    assert len(done) == len(lines) == plan.points == len(points)  # once each
    assert all(p.ok for p in done.values())  # measured again, not failed
