"""The fast door (optimizer/sweep.py) on the CPU interpreter: a point's checks catch a
kernel wrong only under one input condition; a sweep journals every point, a killed
sweep's torn line is dropped, and a resumed sweep measures nothing twice. Timing needs a
GPU (benchmarks/h200.sh sweep); here every point is correct and untimed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer import sweep

BAD = Path(__file__).parents[1] / "bad_kernels"


def test_a_kernel_wrong_only_under_a_condition_fails_its_check():
    task = get_task("softmax")
    shape = (3, 100)  # not a power of two: the padded lanes are where the bug lives
    planted = sweep.check_source("softmax", "float32", (BAD / "softmax_pad_zero.py").read_text(),
                                 [shape], condition_shapes=[])
    assert planted["ok"], planted  # plain inputs: it passes
    planted = sweep.check_source("softmax", "float32", (BAD / "softmax_pad_zero.py").read_text(),
                                 [shape], condition_shapes=[shape])
    assert not planted["ok"] and planted["error_kind"] == "wrong_result", planted
    assert "negative logits" in planted["error_message"]
    assert "elements over tolerance" in planted["error_message"]  # how wrong, as the judge
    naive = sweep.check_config("softmax", "float32", task.default_config, [shape], [shape])
    assert naive["ok"], naive


def _plan(limit: int) -> sweep.SweepPlan:
    plan = sweep.SweepPlan.of("rmsnorm", "float32", limit=limit, shapes="cpu")
    plan.edge_shapes = []
    plan.regimes = {name: shapes[:1] for name, shapes in plan.regimes.items()}
    return plan


def test_a_sweep_journals_each_point_and_resumes_without_measuring_twice(tmp_path):
    journal = tmp_path / "rmsnorm.jsonl"
    plan = _plan(limit=3)
    seen: list[str] = []
    points = sweep.run_sweep(plan, journal, workers=2,
                             on_point=lambda p, n, total: seen.append(p.id))
    assert len(points) == plan.points == len(seen) == len(set(seen))
    assert all(p.ok and p.comparison is None for p in points)  # no GPU: untimed
    lines = journal.read_text().splitlines()
    assert "header" in json.loads(lines[0]) and len(lines) == 1 + plan.points
    parents = {sweep.key(p.config): p.parent for p in points}
    assert parents[sweep.key(plan.task.default_config)] is None  # the naive kernel

    with journal.open("a") as handle:  # a sweep killed mid-line
        handle.write('{"task": "rmsnorm", "dty')
    again: list[str] = []
    bigger = _plan(limit=4)
    points = sweep.run_sweep(bigger, journal, workers=2,
                             on_point=lambda p, n, total: again.append(p.id))
    assert len(again) == bigger.points - plan.points  # only the new configuration
    assert len(points) == bigger.points
    header, done = sweep.read_journal(journal)
    assert header["task"] == "rmsnorm" and len(done) == bigger.points


def test_the_parent_is_one_knob_closer_to_the_naive_kernel():
    task = get_task("softmax")
    default = task.default_config
    for config in list(task.space())[:40]:
        step = sweep.parent_of(task, config)
        if config == default:
            assert step is None
            continue
        assert step is not None
        parent, changed = step
        differs = {k for k in config if config[k] != default[k]}
        assert changed in differs
        assert parent == default or sum(parent[k] != config[k] for k in config) == 1
        assert task.constraint(parent) is None


def test_a_share_delivered_twice_is_merged_once(tmp_path) -> None:
    """Ray may run a share again after its worker died past the end of it (ray_cluster)."""
    task = get_task("softmax")
    configs = list(task.space())[:3]
    lines = [sweep.Point("softmax", "float16", "small", c, None, None, ok=True).to_json()
             for c in configs]
    journal, done, merged = tmp_path / "merged.jsonl", {}, {}
    for _ in range(2):  # what ray_cluster.sweep does with a share's lines
        merged = sweep.merge_points(journal, merged, {"task": "softmax"},
                                    [sweep.Point.from_row(json.loads(x)) for x in lines], done)
    assert len(journal.read_text().splitlines()) == 1 + len(configs) == 1 + len(done)


@pytest.mark.slow
def test_the_command_on_a_host_without_a_gpu_needs_no_interpreter_flag(tmp_path) -> None:
    """`kernelkb sweep` on a CPU host, TRITON_INTERPRET unset as a user has it: its check
    processes run the interpreter themselves (every kernel once failed "0 active
    drivers", and the command ended in a traceback)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["KERNELKB_HOME"] = str(tmp_path / "home")
    done = subprocess.run([sys.executable, "-m", "kernelkb", "sweep", "rmsnorm", "rope",
                           "--limit", "2", "--shapes", "cpu", "--workers", "1", "--out",
                           str(tmp_path)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    for task in ("rmsnorm", "rope"):  # several tasks: one journal each, one after another
        _, points = sweep.read_journal(tmp_path / f"{task}_float16.jsonl")
        assert points and all(p.ok for p in points.values())
        assert f"{task} float16: {len(points)} points" in done.stdout


def test_the_command_refuses_before_measuring(tmp_path, capsys) -> None:
    """A wrong name among several tasks, or one task's configurations for several, is
    refused in words before any journal exists."""
    from kernelkb.cli.main import main

    for argv, says in ((["softmax", "rmsnrom"], "rmsnorm"),
                       (["softmax", "rmsnorm", "--configs", str(tmp_path / "c.json")],
                        "give one TASK")):
        assert main(["sweep", *argv, "--out", str(tmp_path)]) == 2
        assert says in capsys.readouterr().err
    assert not list(tmp_path.glob("*.jsonl"))


def test_a_journal_begun_on_another_device_is_not_resumed_here(tmp_path, capsys) -> None:
    """A journal's points are compared with parents timed on its device: resuming it on
    another (an H100 for an H200's, a CPU for a GPU's) would mix two landscapes in one
    file. The command refuses in words and the journal keeps its bytes."""
    from kernelkb.cli.main import main

    journal = tmp_path / "rmsnorm_float16.jsonl"
    journal.write_text(json.dumps({"header": {"task": "rmsnorm", "dtype": "float16",
                                              "env": {"gpu_name": "NVIDIA H200"}}}) + "\n")
    before = journal.read_bytes()
    assert main(["sweep", "rmsnorm", "--limit", "1", "--shapes", "cpu",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "measured on NVIDIA H200; this is cpu-interpreter" in err and "--out" in err
    assert journal.read_bytes() == before
    with pytest.raises(ValueError, match="NVIDIA H200"):
        sweep.prepare(sweep.SweepPlan.of("rmsnorm", "float16", limit=1, shapes="cpu"),
                      journal, workers=1)


@pytest.mark.slow  # two sweeps of a task in the interpreter (~45 s on 2 cores)
def test_a_point_measured_on_code_the_template_no_longer_renders_is_measured_again(
        tmp_path) -> None:
    """A fixed template (softmax's chunked paths once turned a masked prefix into NaN)
    renders other code for its configurations: their journaled points were measured on
    the old code, so a resumed sweep measures them again and the seeds leave them out
    (Point.stale); points of unchanged code are not measured twice."""
    plan = sweep.SweepPlan.of("rmsnorm", "float16", limit=2, shapes="cpu")
    journal = tmp_path / "rmsnorm_float16.jsonl"
    first = sweep.run_sweep(plan, journal, workers=1)
    assert first and all(p.source_hash and not p.stale(plan.task) for p in first)
    lines = journal.read_text().splitlines()
    row = json.loads(lines[-1])
    row["source_hash"] = "0" * 16  # as if measured on another version of the template
    journal.write_text("\n".join([*lines[:-1], json.dumps(row)]) + "\n")
    _, points = sweep.read_journal(journal)
    assert [p.id for p in points.values() if p.stale(plan.task)] == [sweep.Point.from_row(
        row).id]
    sweep.run_sweep(plan, journal, workers=1)
    _, after = sweep.measured(journal, plan.task)
    assert len(after) == len(first)  # every point fresh again
    assert len(journal.read_text().splitlines()) == len(lines) + 1  # only the stale one


def test_a_dtype_one_task_lacks_is_skipped_among_several(tmp_path, capsys) -> None:
    import argparse

    from kernelkb.cli import sweep as command

    args = argparse.Namespace(task=["attention", "rmsnorm"], dtype=["float32"], regime=None,
                              limit=1, shapes="cpu", configs=None, out=tmp_path)
    jobs = command._plans(args)
    assert [(p.task.name, p.dtype) for p, _ in jobs] == [("rmsnorm", "float32")]
    assert "attention: no dtype float32, skipped" in capsys.readouterr().out
    args.task = ["attention"]
    with pytest.raises(ValueError, match="no dtype 'float32'"):
        command._plans(args)


def test_compiling_ahead_sees_the_checks_sizes_and_strides_without_memory() -> None:
    """Compiled ahead on meta tensors (no memory, no GPU work), a configuration is built
    for the sizes, strides and dtypes its check passes, under each input condition."""
    import torch

    from kernelkb.optimizer.sandbox import ahead

    for name in ("softmax", "rope", "matmul"):
        task = get_task(name)
        shape = task.edge_shapes[0]
        with ahead.meta_generators():  # made without memory, not on the CPU
            assert all(x.device.type == "meta" for x in ahead.made(
                name, "float16", shape, "plain", "meta") if isinstance(x, torch.Tensor))
        plain = task.make_inputs(shape, torch.float16, 0, "cpu")
        for case in ["plain", *[c.name for c in task.input_conditions]]:
            real = plain if case == "plain" else next(
                c.apply(plain, 0) for c in task.input_conditions if c.name == case)
            described = ahead.meta_inputs(name, "float16", shape, case)
            for want, got in zip(real, described, strict=True):
                if isinstance(want, torch.Tensor):
                    assert got.device.type == "meta", (name, case)
                    assert (got.shape, got.stride(), got.dtype) == \
                        (want.shape, want.stride(), want.dtype), (name, case)
                else:
                    assert got == want


@pytest.mark.slow
def test_every_wrapper_path_compiles_ahead_through_every_case(monkeypatch) -> None:
    """The wrapper of every task's configurations (one for each value of each structural
    knob, which picks the wrapper's path) runs on meta tensors through each shape and
    condition its check passes (a launch here does nothing: the interpreter
    has no compiler; on a GPU it compiles in warm-up mode). A wrapper that could not (a
    persistent kernel's SM count read from the meta device) would compile nothing ahead."""
    import types

    import torch
    from triton.runtime.interpreter import InterpretedFunction

    from kernelkb.kernels.discovery import all_tasks
    from kernelkb.optimizer import compile_ahead

    monkeypatch.setattr(InterpretedFunction, "__getitem__", lambda self, grid: lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device=None: types.SimpleNamespace(multi_processor_count=132))
    for name, task in all_tasks().items():
        plan = sweep.SweepPlan.of(name, "float16")
        every, conditioned = sweep._check_shapes(plan)
        cases = len(every) + len(conditioned) * len(task.input_conditions)
        paths = {(v.name, c[v.name]): c for c in plan.configs for v in task.variants}
        short = {sweep.key(c): n for c in {sweep.key(c): c for c in paths.values()}.values()
                 if (n := compile_ahead.compile_config(name, "float16", c, every, conditioned))
                 != cases}
        assert not short, (name, cases, short)
