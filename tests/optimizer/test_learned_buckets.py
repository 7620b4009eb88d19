"""Dispatch buckets learned from measurements (optimizer/learned_buckets.py,
learned_table.py): bounds where the measured best changes, the key that explains the
winners, the nearest bucket with its distance for shapes nobody measured, and the
exported op right on shapes in and outside the buckets (Triton interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.dispatch_runtime import Dispatcher, dispatch_regime
from kernelkb.optimizer.dispatch import add_gpu, entry, new_table
from kernelkb.optimizer.export import export_module
from kernelkb.optimizer.learned_buckets import Measured, bucket_lines, learn
from kernelkb.optimizer.learned_table import config_id, with_buckets

MATMUL = ("M", "N", "K")
CPU = SimpleNamespace(gpu_name="cpu-interpreter", arch="cpu", sm_count=None, vendor="cpu",
                      mem_bandwidth_gbps=None, smem_per_sm_kib=None, peak_tflops=None,
                      triton_version="3", torch_version="2")


def _rows(times: dict[int, dict[str, float]], n: int = 4096) -> list[Measured]:
    """M -> {configuration: ms}, the fastest peer at 1.1x the first configuration's ms."""
    return [Measured((m, n, n), c, ms, "cuBLAS", 1.1 * next(iter(per.values())))
            for m, per in times.items() for c, ms in per.items()]


def test_bounds_sit_where_the_measured_best_changes() -> None:
    rule = get_task("matmul").regimes.rule()
    found = learn(MATMUL, rule, _rows({
        1: {"a": 1.0, "b": 2.0}, 8: {"a": 1.0, "b": 1.5}, 16: {"a": 1.0, "b": 1.2},
        64: {"a": 2.0, "b": 1.0}, 128: {"a": 2.0, "b": 1.5, "c": 1.8},
        1024: {"b": 3.0, "c": 2.0}, 4096: {"b": 9.0, "c": 5.0}}))
    assert found is not None and found.dim == "M"
    got = [(b.name, b.bound, b.config, b.span) for b in found.buckets]
    # geometric middles: isqrt(16 * 64) = 32, isqrt(128 * 1024) = 362
    assert got == [("m_le_32", 32, "a", (1, 16)), ("m_le_362", 362, "b", (64, 128)),
                   ("m_gt_362", None, "c", (1024, 4096))]
    first = found.buckets[0].measured[0]
    assert first["shape"] == "M=1,N=4096,K=4096" and first["vs_peer"] == 1.1
    # one winner everywhere: one bucket, whatever the task's fixed bounds were
    one = learn(MATMUL, rule, _rows({1: {"a": 1.0}, 4096: {"a": 2.0, "b": 3.0}}))
    assert [(b.name, b.bound) for b in one.buckets] == [("m_all", None)]


def test_the_key_is_the_dimension_that_explains_the_winners() -> None:
    """Winners that follow cols alone: keyed on cols, not the rule's rows*cols product."""
    names = ("rows", "cols")
    rule = {"dims": ["rows", "cols"], "inputs": [[0, 0], [0, 1]]}
    rows = [Measured((r, c), "small" if c <= 1024 else "big",
                     1.0) for r in (1, 64, 4096) for c in (128, 1024, 8192, 65536)]
    rows += [Measured((r, c), "big" if c <= 1024 else "small", 2.0)
             for r in (1, 64, 4096) for c in (128, 1024, 8192, 65536)]
    found = learn(names, rule, rows)
    assert found.dim == "cols" and found.inputs == [[0, 1]]
    assert found.changes["cols"] == 1 and set(found.changes) == {"rows", "cols", "rows*cols"}
    assert [b.config for b in found.buckets] == ["small", "big"]


def _learned_softmax_table() -> dict:
    task = get_task("softmax")
    table = new_table(task, "float32")
    short = entry({"NUM_WARPS": 2, "ROWS_PER_PROGRAM": 2}, shapes=[], timed=True,
                  time_ms=None, start_ms=None, run_id="r", env=CPU)
    long = entry({"BLOCK_SIZE": 1024, "ONLINE": True}, shapes=[], timed=True,
                 time_ms=None, start_ms=None, run_id="r", env=CPU)
    add_gpu(table, CPU, {"short_rows": short, "long_rows": long})
    s, lg = config_id(short), config_id(long)
    found = learn(task.shape_names, table["rule"], [
        Measured((64, 128), s, 0.01, "torch.compile", 0.02),
        Measured((64, 1000), s, 0.02),
        Measured((8, 4000), lg, 0.03, "torch.compile", 0.025),
        Measured((8, 4000), s, 0.05),
        Measured((8, 8000), lg, 0.04)])
    return with_buckets(table, "cpu-interpreter", found, [short, long])


def test_a_shape_outside_every_span_runs_the_nearest_bucket_and_says_how_far() -> None:
    table = _learned_softmax_table()
    classes = table["rule"]["classes"]
    assert classes == [["cols_le_2000", 2000], ["cols_gt_2000", None]]  # isqrt(1000*4000)
    assert dispatch_regime(table["rule"], (1500,)) == "cols_le_2000"
    seen = []
    run = Dispatcher(table, lambda item: (lambda x: seen.append(item["config"])),
                     here={"gpu_name": "cpu-interpreter", "arch": "cpu", "sm_count": None})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for cols in (500, 3000, 32000):
            run(SimpleNamespace(shape=(2, cols)))
    assert run.distance == {500: 1.0, 3000: 4000 / 3000, 32000: 4.0}
    far = [str(w.message) for w in caught]
    assert len(far) == 1 and "32000 is 4.0x outside the measured 4000..8000" in far[0]
    lines = "\n".join(bucket_lines(table))
    assert "cols_le_2000" in lines and "rows=64,cols=128 | 0.0100 | torch.compile | 2.00x" \
        in lines


PROBE = """
import warnings, torch, best_softmax as m
warnings.simplefilter("ignore")
for shape in [(4, 128), (16, 1000), (3, 1500), (5, 2100), (2, 9000), (1, 7), (3, 33)]:
    for seed in range(2):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
        for y in (torch.ops.kernelkb.softmax(x), m.dispatch_run(x)):
            assert (y - torch.softmax(x, -1)).abs().max() < 1e-6, shape
print(sorted((k, v[1]) for k, v in m.dispatcher.choices.items()))
print(sorted(m.dispatcher.distance.items()))
print(len(m.launcher.sources))
"""


def test_the_exported_op_is_right_in_and_outside_the_learned_buckets(tmp_path: Path) -> None:
    task = get_task("softmax")
    export_module(task, task.render({"NUM_WARPS": 2, "ROWS_PER_PROGRAM": 2}),
                  tmp_path / "best_softmax.py", dtype="float32",
                  table=_learned_softmax_table())
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parents[2])])}
    env.pop("KERNELKB_DISPATCH_TABLE", None)
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    choices, distance, bound = done.stdout.splitlines()
    assert "(2100, 'cols_gt_2000')" in choices and "(1500, 'cols_le_2000')" in choices
    assert "(7, 'cols_le_2000')" in choices and "(9000, 'cols_gt_2000')" in choices
    assert "(7, 18.28" in distance and "(1000, 1.0)" in distance and "(1500, 1.5)" in distance
    assert bound == "7"  # one launch plan per input layout
