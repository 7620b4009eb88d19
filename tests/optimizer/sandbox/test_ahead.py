"""The worker's compile-ahead processes (sandbox/ahead.py): which shapes they take, and
that none outlives ``stop()`` (the judge reads the final report only while no other
process of the evaluation is alive). On this CPU they compile nothing (the interpreter
has no compiler); the GPU test in test_gpu.py measures what they save."""

from __future__ import annotations

import os
import time

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import ahead

SHAPES = [(1, 7), (64, 1000), (256, 4096)]


def _request(source: str, **extra) -> dict:
    return {"task": "softmax", "dtype": "float16", "source": source, **extra}


def test_the_first_shape_is_left_to_the_checks_and_the_rest_taken_from_the_last() -> None:
    template = get_task("softmax").template
    started = ahead.Ahead(_request(template, parent_source=template, timing=True),
                          SHAPES, SHAPES[1:])
    children = list(started.processes)
    try:
        assert started.jobs == 2 + 2  # the last two checked shapes, the parent's timed two
        assert 1 <= len(children) <= max(1, (os.cpu_count() or 2) - 1)
    finally:
        summary = started.stop()
    assert all(p.poll() is not None for p in children)
    assert summary["processes"] == len(children) and summary["jobs"] == 4


def test_no_parent_jobs_without_timing() -> None:
    template = get_task("softmax").template
    started = ahead.Ahead(_request(template, parent_source=template), SHAPES, SHAPES)
    try:
        assert started.jobs == 2
    finally:
        started.stop()


def test_a_process_that_never_ends_is_killed_by_stop() -> None:
    """A candidate whose import spins: its compile-ahead process is ended, not waited for."""
    spinning = get_task("softmax").template + "\nwhile True:\n    pass\n"
    started = ahead.Ahead(_request(spinning), SHAPES, SHAPES)
    children = list(started.processes)
    time.sleep(2.0)  # its interpreter up and spinning
    assert children and all(p.poll() is None for p in children)
    began = time.perf_counter()
    summary = started.stop()
    assert time.perf_counter() - began < 10
    assert all(p.poll() is not None for p in children)
    assert summary["finished"] == 0


def test_a_process_that_ends_is_counted_finished() -> None:
    started = ahead.Ahead(_request(get_task("softmax").template), SHAPES[:2], SHAPES[:2])
    orders = list(started.orders)
    assert orders and all(os.path.exists(path) for path in orders)
    deadline = time.monotonic() + 120
    while any(p.poll() is None for p in started.processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    summary = started.stop()
    assert summary == {**summary, "processes": 1, "finished": 1, "jobs": 1}
    assert not any(os.path.exists(path) for path in orders)  # its order file removed
