"""The worker's compile-ahead processes (sandbox/ahead.py): which shapes they take, and
that none outlives ``stop()`` (the judge reads the final report only while no other
process of the evaluation is alive). On this CPU they compile nothing (the interpreter
has no compiler); the GPU test in test_gpu.py measures what they save."""

from __future__ import annotations

import json
import os
import time

import pytest
import torch

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import ahead, judge

SHAPES = [(1, 7), (64, 1000), (256, 4096)]


def _request(source: str, **extra) -> dict:
    return {"task": "softmax", "dtype": "float16", "source": source, **extra}


def test_the_first_shape_is_left_to_the_checks_and_the_rest_taken_from_the_last() -> None:
    template = get_task("softmax").template
    started = ahead.Ahead(_request(template, parent_source=template, timing=True),
                          SHAPES, SHAPES[1:], [])
    children = list(started.processes)
    try:
        assert started.jobs == 2 + 2  # the last two checked shapes, the parent's timed two
        assert 1 <= len(children) <= max(1, (os.cpu_count() or 2) - 1)
    finally:
        summary = started.stop()
    assert all(p.poll() is not None for p in children)
    assert summary["processes"] == len(children) and summary["jobs"] == 4


def test_code_compiled_into_the_trusted_layer_is_left_out() -> None:
    """The runner compiled the generated incumbent outside the jail (trusted_cache.py):
    only the candidate's shapes are compiled here; with both compiled, nothing is."""
    template = get_task("softmax").template
    edited = template + "\n# an agent's edit\n"
    started = ahead.Ahead(_request(edited, parent_source=template, timing=True,
                                   compiled_trusted=[template]), SHAPES, SHAPES[1:], [])
    try:
        assert started.jobs == 2  # the candidate's last two checked shapes
    finally:
        started.stop()
    both = ahead.Ahead(_request(template, parent_source=template, timing=True,
                                compiled_trusted=[template]), SHAPES, SHAPES[1:], [])
    assert both.jobs == 0 and both.processes == []
    assert both.stop()["processes"] == 0


def test_no_parent_jobs_without_timing() -> None:
    template = get_task("softmax").template
    started = ahead.Ahead(_request(template, parent_source=template), SHAPES, SHAPES, [])
    try:
        assert started.jobs == 2
    finally:
        started.stop()


def test_a_process_that_never_ends_is_killed_by_stop() -> None:
    """A candidate whose import spins: its compile-ahead process is ended, not waited for."""
    spinning = get_task("softmax").template + "\nwhile True:\n    pass\n"
    started = ahead.Ahead(_request(spinning), SHAPES, SHAPES, [])
    children = list(started.processes)
    time.sleep(2.0)  # its interpreter up and spinning
    assert children and all(p.poll() is None for p in children)
    began = time.perf_counter()
    summary = started.stop()
    assert time.perf_counter() - began < 10
    assert all(p.poll() is not None for p in children)
    assert summary["finished"] == 0


@pytest.mark.slow  # > 20 s on two cores
def test_a_process_that_ends_is_counted_finished() -> None:
    started = ahead.Ahead(_request(get_task("softmax").template), SHAPES[:2], SHAPES[:2], [])
    orders = list(started.orders)
    assert orders and all(os.path.exists(path) for path in orders)
    deadline = time.monotonic() + 120
    while any(p.poll() is None for p in started.processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    summary = started.stop()
    assert summary == {**summary, "processes": 1, "finished": 1, "jobs": 1}
    assert not any(os.path.exists(path) for path in orders)  # its order file removed


def test_the_judges_foreseen_shapes_are_the_ones_it_asks_and_never_drawn() -> None:
    """What the worker compiles ahead for the judge: the shapes past every list (the
    judge's unusual-inputs check asks exactly these where the reference takes them) and
    the other dtypes on their shape; the same on every call (no drawn shape leaks)."""
    task = get_task("softmax")
    request = {"task": "softmax", "dtype": "float16", "shapes": [list(s) for s in SHAPES]}
    foreseen = judge.foreseen_shapes(task, request)
    assert foreseen == judge.foreseen_shapes(task, request)
    past = judge.past_list_shapes(task, request, torch.float16)
    assert past and [(s, "float16") for s in past] == [p for p in foreseen if p[1] == "float16"]
    widest = max(max(s[1] for s in lst) for lst in (task.sweep_shapes, task.edge_shapes))
    assert any(s[1] > widest for s in past)  # a row past every list's longest
    others = [p for p in foreseen if p[1] != "float16"]
    assert {d for _, d in others} == set(task.dtypes) - {"float16"}
    assert {s for s, _ in others} == {min(task.cpu_shapes, key=lambda s: s[0] * s[1])}


def test_the_foreseen_jobs_come_first_each_in_its_dtype() -> None:
    template = get_task("softmax").template
    foreseen = [((1, 256512), "float16"), ((3, 1823), "float32")]
    started = ahead.Ahead(_request(template), SHAPES, SHAPES, foreseen)
    try:
        assert started.jobs == len(foreseen) + len(SHAPES) - 1
        with open(started.orders[0]) as handle:
            first = json.load(handle)["jobs"][0]
        assert (first[1], first[2]) == ([1, 256512], "float16")
    finally:
        started.stop()


def test_a_process_whose_candidate_reaches_past_the_rules_says_so() -> None:
    """The worker's watchers are armed in the compile-ahead processes too: a candidate
    that reads a file at its import there (past the source rules, which the test leaves
    out) makes its process exit REFUSED, which stop() counts."""
    reading = get_task("softmax").template + "\n_HOST = open('/etc/hostname').read()\n"
    started = ahead.Ahead(_request(reading), SHAPES[:2], SHAPES[:2], [])
    deadline = time.monotonic() + 120
    while any(p.poll() is None for p in started.processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    summary = started.stop()
    assert summary["refused"] == 1 and summary["finished"] == 1, summary
