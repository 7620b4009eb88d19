"""The GPU's turns between evaluations at once: checks share it, timing has it alone, a
timer is not starved by checks, and time spent waiting is not the candidate's time.

Each "evaluation" opens the lock files itself (as each worker gets its own descriptors),
so the flocks conflict exactly as they do between worker processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kernelkb.optimizer.sandbox import gpu_turns, runner
from kernelkb.optimizer.sandbox.gpu_turns import GpuTurns


@pytest.fixture
def lock_files(tmp_path: Path):
    opened = []

    def turns(report=lambda waited: None) -> GpuTurns:
        fds = [os.open(tmp_path / name, os.O_RDWR | os.O_CREAT, 0o600)
               for name in ("gpu.gate", "gpu.lock")]
        opened.extend(fds)
        return GpuTurns(*fds, report=report)

    yield turns
    for fd in opened:
        os.close(fd)


def test_checks_share_the_gpu(lock_files) -> None:
    a, b = lock_files(), lock_files()
    with a.share():
        began = time.monotonic()
        with b.share():
            assert time.monotonic() - began < 0.5
    assert a.waited_s == 0 and b.waited_s == 0


def test_timing_waits_for_a_check_in_flight_and_holds_off_new_ones(lock_files) -> None:
    checker, timer, late = lock_files(), lock_files(), lock_files()
    events: list[str] = []

    def check() -> None:
        with checker.share():
            events.append("check starts")
            time.sleep(0.4)
            events.append("check ends")

    def time_it() -> None:
        with timer.exclusive() as waited:
            events.append(f"timing starts after {waited:.1f}")
            time.sleep(0.4)
            events.append("timing ends")

    def late_check() -> None:
        with late.share():
            events.append("late check starts")

    first = threading.Thread(target=check)
    first.start()
    time.sleep(0.1)
    second = threading.Thread(target=time_it)
    second.start()
    time.sleep(0.1)  # the timer holds the gate and waits for the first check
    third = threading.Thread(target=late_check)
    third.start()
    for thread in (first, second, third):
        thread.join(5)
    order = [e.split(" after")[0] for e in events]
    assert order == ["check starts", "check ends", "timing starts", "timing ends",
                     "late check starts"], events
    assert 0.2 < timer.waited_s < 1.0
    assert late.waited_s > 0.3  # it waited for the timing, not in front of it


def test_waiting_is_reported_while_it_lasts(lock_files, monkeypatch) -> None:
    holder, waiter_reports = lock_files(), []
    waiter = lock_files(report=waiter_reports.append)
    with holder.exclusive():
        thread = threading.Thread(target=lambda: waiter.share().__enter__())
        thread.start()
        time.sleep(1.3)
    thread.join(5)
    assert waiter_reports and waiter_reports[0] >= 1.0  # reported during the wait
    assert waiter_reports[-1] == pytest.approx(waiter.waited_s)


def test_a_wait_gives_up_at_its_bound(lock_files, monkeypatch) -> None:
    monkeypatch.setattr(gpu_turns, "MAX_WAIT_S", 0.3)
    holder, waiter = lock_files(), lock_files()
    with holder.exclusive(), waiter.exclusive() as waited:
        assert waited is not None and waited < 0  # went on without the GPU to itself


def test_without_descriptors_turns_are_no_ops() -> None:
    turns = GpuTurns(None, None)
    with turns.share(), turns.exclusive() as waited:
        assert waited is None


def _sleeper(seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])


def _result_fd(tmp_path: Path, progress: dict) -> int:
    fd = os.open(tmp_path / "result.json", os.O_RDWR | os.O_CREAT, 0o600)
    os.write(fd, json.dumps(progress).encode())
    return fd


@pytest.mark.parametrize(("reported", "timed_out"), [(0.0, True), (2.0, False),
                                                     ("junk", True)])
def test_the_time_limit_leaves_out_waiting_for_the_gpu(tmp_path, reported, timed_out) -> None:
    fd = _result_fd(tmp_path, {"final": False, "gpu_wait_s": reported})
    proc = _sleeper(1.5)
    try:
        got, waited, _ = runner._wait(proc, fd, time.monotonic(), 0.8)
    finally:
        proc.kill()
        proc.wait()
        os.close(fd)
    assert got is timed_out
    assert waited == (2.0 if reported == 2.0 else 0.0)


def test_a_reported_wait_is_bounded(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(runner, "MAX_WAIT_S", 0.5)
    fd = _result_fd(tmp_path, {"gpu_wait_s": 1e9})
    proc = _sleeper(3.0)
    try:
        began = time.monotonic()
        got, waited, _ = runner._wait(proc, fd, began, 0.5)
        elapsed = time.monotonic() - began
    finally:
        proc.kill()
        proc.wait()
        os.close(fd)
    assert got is True and waited == 0.5 and elapsed < 2.0
    message = runner._timeout({"shape": "rows=1"}, 0.5, 1.0)["error_message"]
    assert "besides 1 s waiting for the GPU" in message


def test_an_evaluation_alone_waits_for_the_others_and_holds_them_off(monkeypatch) -> None:
    """The slots behind the out-of-memory re-run: ``crowded()`` says whether another
    evaluation ran beside this one; ``alone=True`` runs with none beside it."""
    monkeypatch.setenv("KERNELKB_SANDBOX_CONCURRENCY", "4")
    slots, events = runner._Slots(), []
    first_in = threading.Event()

    def first() -> None:
        with slots.take() as crowded:
            first_in.set()
            time.sleep(0.3)
            events.append(("first ends", crowded()))

    def alone() -> None:
        with slots.take(alone=True) as crowded:
            events.append(("alone starts", crowded()))
            time.sleep(0.3)
            events.append(("alone ends", None))

    def late() -> None:
        with slots.take():
            events.append(("late starts", None))

    threads = [threading.Thread(target=first), threading.Thread(target=alone),
               threading.Thread(target=late)]
    threads[0].start()
    first_in.wait(2)
    threads[1].start()
    time.sleep(0.05)
    threads[2].start()
    for thread in threads:
        thread.join(5)
    assert [e[0] for e in events] == ["first ends", "alone starts", "alone ends",
                                      "late starts"], events
    assert events[1][1] is False  # nothing ran beside the one alone
    with slots.take() as crowded:
        pass
    assert crowded() is False
