"""Error statistics, the pass rules and the cheat guards, in-process (no subprocess)."""

from __future__ import annotations

import signal

import torch

from kernelkb.optimizer.sandbox import checks
from kernelkb.optimizer.sandbox.errors import classify_exit, trim_compiler_message


def test_stats_count_mismatches_and_name_the_first():
    ref = torch.ones(4, 8)
    out = ref.clone()
    out[2, 5] = 1.5
    stats = checks.error_stats(out, ref, atol=1e-3, rtol=1e-2)
    assert stats.mismatches == 1 and stats.first_mismatch == (2, 5)
    assert stats.max_abs_err == 0.5 and stats.mismatch_share == 1 / 32
    assert checks.shape_verdict(stats, max_bias=1.0) == "wrong_result"


def test_small_systematic_bias_passes_elementwise_and_fails_bias():
    ref = torch.rand(64, 64) + 0.5
    stats = checks.error_stats(ref * 1.004, ref, atol=1e-3, rtol=1e-2)
    assert stats.mismatches == 0
    assert abs(stats.bias - 0.004) < 1e-4
    assert checks.shape_verdict(stats, max_bias=2e-3) == "bias"
    assert checks.shape_verdict(stats, max_bias=1e-2) is None


def test_an_output_of_zero_where_the_reference_underflows_is_no_bias():
    """GeGLU far in gelu's negative tail: the float64 reference keeps -1.8e-28, a float32
    kernel gives 0; relative to that reference's own size it read as a 100% drift."""
    ref = torch.tensor([[-1.8e-28]])
    stats = checks.error_stats(torch.zeros_like(ref), ref, atol=1e-5, rtol=1e-5)
    assert stats.mismatches == 0 and stats.elements < checks.BIAS_MIN_ELEMENTS
    assert checks.shape_verdict(stats, max_bias=1e-5) is None  # 1e-28: immaterial
    drift = checks.error_stats(ref + 5e-6, ref, atol=1e-5, rtol=1e-5)  # half of atol, all one way
    assert drift.mismatches == 0 and checks.shape_verdict(drift, max_bias=1e-5) == "bias"


def test_a_drift_under_atol_on_long_rows_is_a_bias_and_rounding_is_not():
    """fp16 softmax over 70000 columns: every probability is ~1.4e-5, far under atol
    (1e-3). A floor at atol read a 1% drift of every element as 0.01% and passed it."""
    x = torch.randn(2, 70000, dtype=torch.float64) * 3
    ref = torch.softmax(x.float(), -1).half()
    honest = torch.exp2((x - x.amax(-1, keepdim=True)).float() * 1.4426950408889634)
    honest = (honest / honest.sum(-1, keepdim=True)).half()
    drift = (ref.float() * 1.01).half()
    for out, verdict in ((honest, None), (drift, "bias")):
        stats = checks.error_stats(out, ref, atol=1e-3, rtol=1e-2)
        assert stats.mismatches == 0
        assert checks.shape_verdict(stats, max_bias=2e-3) == verdict, stats


def test_nan_in_output_is_wrong_but_matching_inf_is_not():
    ref = torch.tensor([1.0, float("inf"), 2.0])
    assert checks.shape_verdict(checks.error_stats(ref.clone(), ref, 1e-3, 1e-3), 1e-3) is None
    out = ref.clone()
    out[2] = float("nan")
    stats = checks.error_stats(out, ref, 1e-3, 1e-3)
    assert stats.nonfinite == 1 and checks.shape_verdict(stats, 1e-3) == "wrong_result"


def test_structure_mismatch_is_reported():
    ref = torch.zeros(2, 3)
    assert "shape" in checks.compare_outputs(torch.zeros(3, 2), ref, 1e-3, 1e-3)
    assert "dtype" in checks.compare_outputs(torch.zeros(2, 3, dtype=torch.float16), ref, 1, 1)
    assert "2 tensor(s)" in checks.compare_outputs((ref, ref), ref, 1e-3, 1e-3)


def test_modified_inputs_and_expected_mutations():
    x, cache = torch.randn(8), torch.zeros(8)
    saved = checks.snapshot([x, cache, 3])
    cache += 1
    assert checks.modified_inputs([x, cache, 3], saved) == [1]
    assert checks.modified_inputs([x, cache, 3], saved, expected={1: torch.ones(8)}) == []


def test_aliasing_sees_views_and_reused_buffers():
    x = torch.randn(4, 4)
    assert "input 0" in checks.aliasing([x[1]], [x], [])
    old = torch.empty(16)
    assert "earlier call" in checks.aliasing([old[4:8]], [x], [old])
    assert checks.aliasing([torch.empty(4, 4)], [x], [old]) is None


def test_exit_classification():
    assert classify_exit(-signal.SIGSEGV, "")[1] == "illegal_memory_access"
    assert classify_exit(-signal.SIGKILL, "")[1] == "out_of_memory"
    assert classify_exit(1, "RuntimeError: CUDA error: an illegal memory access was encountered"
                         )[1] == "illegal_memory_access"
    assert classify_exit(1, "torch.OutOfMemoryError: CUDA out of memory.")[1] == "out_of_memory"
    assert classify_exit(-signal.SIGABRT, "")[1] == "crash"


def test_compiler_message_keeps_the_marked_line():
    text = "\n".join([f"src line {i}" for i in range(30)] +
                     ["    y = a + b", "        ^", "ValueError('incompatible dimensions')"])
    trimmed = trim_compiler_message(text)
    assert "y = a + b" in trimmed and "incompatible" in trimmed and "src line 3\n" not in trimmed


def test_chunked_stats_equal_one_pass(monkeypatch):
    ref = torch.rand(13, 9) + 0.5
    out = ref * 1.001
    out[5, 3], out[11, 2] = 9.0, float("nan")
    whole = checks.error_stats(out, ref, 1e-3, 1e-2)
    monkeypatch.setattr(checks, "CHUNK", 7)
    chunked = checks.error_stats(out, ref, 1e-3, 1e-2)
    assert chunked.first_mismatch == (5, 3) and chunked.mismatches == 2
    for name in ("mean_abs_err", "bias", "mismatch_share", "nonfinite", "elements"):
        assert abs(getattr(chunked, name) - getattr(whole, name)) < 1e-12, name


def test_worker_times_the_sweep_shapes_not_the_edge_shapes(tmp_path):
    from kernelkb.kernels.discovery import get_task
    from kernelkb.optimizer.sandbox.worker import Worker

    task = get_task("softmax")
    shapes = [*task.edge_shapes, *task.cpu_shapes]
    worker = Worker({"result_path": str(tmp_path / "r.json"), "task": "softmax",
                     "dtype": "float16", "shapes": [list(s) for s in shapes]})
    assert worker.timed_shapes() == [s for s in task.cpu_shapes if s not in task.edge_shapes]
    alone = Worker({"result_path": str(tmp_path / "r.json"), "task": "softmax",
                    "dtype": "float16", "shapes": [list(s) for s in task.edge_shapes]})
    assert alone.timed_shapes() == list(task.edge_shapes)


def test_a_mismatch_in_the_second_output_names_that_output_and_its_row_and_column():
    q, k = torch.ones(3, 5), torch.ones(4, 6)
    bad_k = k.clone()
    bad_k[2, 4] = 3.0
    stats = checks.compare_outputs((q.clone(), bad_k), (q, k), 1e-3, 1e-3)
    assert stats.first_output == 1 and stats.first_mismatch == (2, 4)
    text = checks.describe_failure("wrong_result", "s", stats, 1e-3)
    assert "first at output 1, row 2, column 4" in text
    four_d = checks.compare_outputs(torch.zeros(2, 2, 2, 2), torch.ones(2, 2, 2, 2), 0.1, 0.1)
    assert checks.mismatch_location(four_d) == "index (0, 0, 0, 0)"  # one output: not named


def test_writes_around_a_view_are_seen_and_the_view_alone_is_not_enough():
    """The storage outside an input's view is the caller's memory too: a strided row's
    padding, a slice's neighbours; a write into the view itself is modified_inputs'."""
    wide = torch.full((4, 8), float("nan"))
    rows = wide[:, :5]
    rows.copy_(torch.randn(4, 5))
    buffer = torch.zeros(10)
    middle = buffer[2:6]
    saved = checks.surroundings([rows, middle, 3])
    assert checks.written_around([rows, middle, 3], saved) == []
    middle.fill_(1.0)  # inside the view: not this check's
    assert checks.written_around([rows, middle, 3], saved) == []
    wide[1, 6] = 0.0  # a row's padding
    buffer[7] = 2.0  # past a contiguous view's end
    assert checks.written_around([rows, middle, 3], saved) == [0, 1]
    assert checks.written_around([rows, middle, 3], saved, skip=(0,)) == [1]


def test_an_output_layout_must_be_row_major_the_references_or_an_inputs():
    x = torch.randn(6, 4)
    column_major = x.t().contiguous().t()
    ref = x.clone()
    assert checks.layout_problem([x.clone()], [ref], [x]) is None
    problem = checks.layout_problem([column_major], [ref], [x])
    assert problem is not None and "strides (1, 6)" in problem
    # laid out as a column-major input of its shape, as torch.empty_like gives
    assert checks.layout_problem([column_major.clone()], [ref], [column_major]) is None
    assert checks.layout_problem([column_major], [column_major.clone()], [x]) is None
