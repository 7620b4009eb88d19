"""GPU-only checks for the H200 run: the side-stream cheat, filled timing fields, the
suspect flag, the baseline and the measured peaks. Skipped without CUDA."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from kernelkb.kb.record import Environment, Feedback
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.shared.vocabulary import Verdict
from kernelkb.optimizer.sandbox import evaluate, measure_baseline, measure_peaks
from kernelkb.optimizer.sandbox.judge import SEEN_SLACK
from kernelkb.optimizer.verdict import judge

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

BAD = Path(__file__).parents[2] / "bad_kernels"
SHAPES = [(1, 7), (1024, 4096), (4096, 4096)]


@pytest.fixture(scope="module")
def timed():
    baseline = measure_baseline("softmax", "float16", SHAPES)
    source = get_task("softmax").template
    return evaluate("softmax", source, shapes=SHAPES, baseline=baseline), baseline


def test_side_stream_launch_is_caught():
    result = evaluate("softmax", (BAD / "side_stream.py").read_text(), shapes=SHAPES[1:])
    assert result.error_kind == "cheat_unsynchronised", result.text


def test_the_gpus_own_timestamps_see_a_side_stream_the_events_miss():
    """kernel_clock: a matmul on a side stream never joined back is invisible to a pair of
    events on the current stream, not to CUPTI."""
    from kernelkb.optimizer.sandbox import compare, kernel_clock

    # milliseconds of hidden matmuls, well over a call's host time: events on an idle
    # stream measure the host between their two records (0.67 ms a call under CUPTI on an
    # H100), which hid a single 0.17 ms matmul
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    side = torch.cuda.Stream()

    def hidden():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(4):
                a @ a

    reading = kernel_clock.read(hidden)
    events_ms = compare.gpu_profile(hidden, compare.GpuClock())[0]
    assert reading is not None and reading.busy_ms > 2.0, reading  # ~4-6 ms of matmul
    assert kernel_clock.under_busy_time(events_ms, reading.busy_ms), (events_ms, reading)
    assert kernel_clock.hides_work(reading), reading  # the events around the same calls too
    # and the timestamps name it: a library's GEMM, none of a candidate's kernels
    assert kernel_clock.foreign_kernels(reading.kernels, {"softmax_kernel"}), reading.kernels


def test_compiling_ahead_keeps_the_verdict_and_ends_its_processes(monkeypatch):
    """The same honest kernel judged with its shapes compiled ahead (sandbox/ahead.py) and
    without: both pass, and the compile-ahead processes were started and ended before the
    report (the judge refuses a report read while another process lives)."""
    source = get_task("softmax").template
    shapes = [(1, 7), (64, 50257), (8, 128256), (4096, 4096)]
    on = evaluate("softmax", source, shapes=shapes, timeout_s=600)
    monkeypatch.setenv("KERNELKB_COMPILE_AHEAD", "0")
    off = evaluate("softmax", source, shapes=shapes, timeout_s=600)
    assert on.ok and off.ok, (on.text, off.text)
    ahead = json.loads(on.artifacts["compiled_ahead"])
    assert ahead["processes"] >= 1 and ahead["jobs"] == len(shapes) - 1, ahead
    assert json.loads(off.artifacts["compiled_ahead"]) is None
    print(f"compile ahead: {on.wall_s:.1f} s with, {off.wall_s:.1f} s without ({ahead})")


def test_timing_fields_are_filled(timed):
    result, baseline = timed
    assert result.ok and result.stage == "performance", result.text
    assert result.timing_available and result.time_ms > 0
    # the GPU's own timestamps beside the events' figure, on every timed shape
    assert set(result.busy_timings) == set(result.gpu_timings), result.busy_timings
    for label, (gpu_ms, _) in result.gpu_timings.items():
        assert 0 < result.busy_timings[label] and gpu_ms >= 0.6 * result.busy_timings[label]
    task = get_task("softmax")
    sweep_labels = {task.shape_label(s) for s in SHAPES if s not in task.edge_shapes}
    assert sweep_labels and set(result.timings) == sweep_labels  # edge shapes: checked only
    assert task.shape_label((1, 7)) in result.shapes_checked
    assert all(iqr >= 0 for _, iqr in result.timings.values())
    assert set(result.graph_timings) == sweep_labels  # GPU time alone, beside the eager call
    for label, graph in result.graph_timings.items():
        assert 0 < graph <= result.timings[label][0] * 1.5, (label, graph, result.timings)
    assert result.speedup_vs_baseline is not None
    assert result.achieved_gbps > 0 and 0 < result.peak_share < 1.2
    assert result.registers is not None and result.registers > 0
    assert result.spills is not None and result.smem_bytes is not None
    assert result.bottleneck_hint
    assert not result.suspect, result.suspect_reasons
    # the judge's share of the wall time: its CUDA context made while the worker ran
    assert {"CUDA context", "spot checks", "clock"} <= set(result.judge["laps_s"])
    assert float(result.artifacts["interpreter_wait_s"]) >= 0
    Feedback.model_validate(result.feedback_dict())
    env = Environment.model_validate(result.env)
    assert env.arch.startswith("sm_") and env.sm_count and env.mem_bandwidth_gbps


def test_impossible_speedup_is_remeasured_and_flagged(timed):
    result, _ = timed
    slow_parent = dataclasses.replace(
        result, timings={k: (m * 100, i) for k, (m, i) in result.timings.items()})
    child = evaluate("softmax", get_task("softmax").template, shapes=SHAPES, parent=slow_parent)
    assert child.suspect and any("faster than the parent" in r for r in child.suspect_reasons)
    assert "SUSPECT" in child.text
    # no source to time the parent beside it: no comparison, and a suspect figure is no
    # verdict (the speedup itself comes from GPU times, which the planted call times miss)
    assert child.comparison is None
    assert judge(child, slow_parent, claimed_gain=True, noise=0.02) is Verdict.neutral


def test_measured_peaks_are_plausible():
    peaks = measure_peaks(copy_mib=512, matmul_n=4096)
    assert 500 < peaks["mem_bandwidth_gbps"] < 10_000
    assert 50 < peaks["peak_tflops"] < 3_000


def test_stale_parent_figure_is_retimed_beside_the_child(timed):
    """A parent measured slow in another process (launch noise) must not turn a real gain
    into a suspect one: given the parent's source, the worker times it again beside the
    child, and the verdict and speedup use that figure."""
    result, _ = timed
    source = get_task("softmax").template
    stale = dataclasses.replace(
        result, timings={k: (m * 100, i) for k, (m, i) in result.timings.items()})
    child = evaluate("softmax", source, shapes=SHAPES, parent=stale, parent_source=source)
    assert not child.suspect, child.suspect_reasons
    assert set(child.parent_retimed) == set(child.timings)  # every shape looked 100x faster
    assert 0.5 < child.speedup_vs_parent < 2.0  # the same kernel: no gain, once re-timed
    # the verdict's figure: the interleaved comparison, the same kernel on both sides
    assert child.comparison and child.comparison.outcome == "neutral", child.comparison
    assert 0.97 < child.comparison.ratio < 1.03


# -- issue 12: cheats only a GPU shows, and the CPU ones again on the GPU path ----------
@pytest.mark.parametrize(("name", "kind"), [
    ("patch_do_bench", "cheat_timer"),  # a correct kernel + four lines halving do_bench
    ("patch_clock_in_run", "cheat_timer"),
    ("timed_differently", "cheat_timer"),  # less work when it sees the timing loop
    ("captured_differently", "cheat_timer"),  # less work when it sees a CUDA-graph capture
    ("torch_plain", "torch_compute"),
    ("torch_fallback", "torch_compute"),
    ("overwrite_after_launch", "torch_compute"),
    ("numpy_roundtrip", "torch_compute"),  # .cpu().numpy(): a host read of the data
    # issue 25's classes, on the GPU path
    ("swaps_event_timer", "cheat_timer"),  # the event timer's bytecode swapped
    ("rebinds_constants", "cheat_timer"),  # thresholds and allowed ops rebound
    ("side_stream_waits", "cheat_timer"),  # a side stream never joined, thresholds rebound
    # same launches, lazy past a device-side count: the count is a buffer kept across
    # calls and left changed (launch_plan.Plan.kept_and_changed), refused before timing
    ("lazy_after_n", "cheat_aliasing"),
    ("torch_copied_out", "torch_compute"),  # torch's answer copied out by a Triton kernel
    ("dispatch_disabled", "torch_compute"),
    ("torch_on_thread", "torch_compute"),
    ("thread_after_return", "torch_compute"),
    ("output_pool", "cheat_aliasing"),
    ("tracker_off", "cheat_tamper"),
    # GPU work past the dispatch mode and the launch tracking
    ("graph_replay", "torch_compute"),  # torch.softmax captured, replayed on the data
    ("jiterator_hidden", "torch_compute"),  # exp(x - max) by a jiterator kernel
    ("grid_hook_compute", "torch_compute"),  # torch in a pre-run hook, inside the launch
    ("torch_when_timed", "torch_compute"),  # honest when checked, torch when timed
    ("clock_switched_off", "cheat_tamper"),  # the GPU's own clock switched off
])
def test_planted_cheat_is_caught_on_the_gpu(name, kind):
    """The GPU's layers alone: the rule that refuses code swaps and gc walks at the
    source is off here (test_introspection.py has it)."""
    result = evaluate("softmax", (BAD / f"{name}.py").read_text(), shapes=SHAPES[1:],
                      refuse_introspection=False, refuse_surroundings=False)
    assert not result.ok and result.error_kind == kind, result.text
    assert not result.timing_available


@pytest.mark.parametrize("name", ["frames_counterfactual", "gc_reads_tracker"])
def test_reaching_into_the_harness_is_refused_on_the_gpu(name):
    """The rule that refuses frames and gc walks to the candidate, on the GPU path: each
    plant reads the harness before its first launch, so the refusal comes first."""
    result = evaluate("softmax", (BAD / f"{name}.py").read_text(), shapes=SHAPES[1:])
    assert result.error_kind == "cheat_tamper", result.text
    assert "reached into the evaluator" in result.error_message, result.error_message


@pytest.mark.parametrize("name", ["time_bomb", "date_bomb", "jail_detect", "env_detect",
                                  "file_detect", "modules_detect"])
def test_a_kernel_honest_only_inside_the_evaluator_is_refused_on_the_gpu(name):
    """The rule that a kernel's wrapper does not read its surroundings, on the GPU path."""
    result = evaluate("softmax", (BAD / f"{name}.py").read_text(), shapes=SHAPES[1:])
    assert result.error_kind == "cheat_tamper", result.text
    assert "read its surroundings" in result.error_message, result.error_message


def test_a_read_past_the_end_whose_values_are_discarded_is_caught_on_the_gpu(timed):
    """The guard regions cannot see a read whose values the kernel throws away; the
    interpreter's pass beside the GPU work can (interpreter_pass.py)."""
    result = evaluate("softmax", (BAD / "oob_read_discarded.py").read_text(), shapes=SHAPES)
    assert (result.stage, result.error_kind) == ("correctness", "illegal_memory_access"), \
        result.text
    assert "in the Triton interpreter" in result.error_message, result.error_message
    assert not result.timing_available
    honest, _ = timed
    assert honest.artifacts["interpreter_pass"].startswith("every access in bounds"), \
        honest.artifacts


def test_lazy_after_n_is_refused_for_the_count_it_keeps():
    """Honest on every checked call, lazy past a count it keeps on the device: once only
    the judge's check after its own timed calls saw it; the count is a buffer every call
    leaves changed, refused on the first checked shape (H100, run of 2026-12-05)."""
    result = evaluate("softmax", (BAD / "lazy_after_n.py").read_text(), shapes=SHAPES[1:])
    assert result.error_kind == "cheat_aliasing", result.text
    assert "kept from before it" in result.error_message, result.error_message


def test_answers_kept_per_input_are_caught_on_fresh_inputs():
    """A matmul that copies the answer it kept for inputs it has seen (content_cache.py)
    is right on every new input; the judge's calls on fresh inputs do the GEMM its timed
    calls skipped. The naive kernel at the same shape passes that test."""
    shape = [(4096, 14336, 4096)]  # ~0.7 ms a GEMM: the GPU sets the pace
    result = evaluate("matmul", (BAD / "content_cache.py").read_text(), shapes=shape)
    # its fingerprint and kept answers are buffers every call leaves changed: refused
    # before the judge's fresh inputs (H100, run of 2026-12-05), as on the CPU
    assert result.error_kind == "cheat_aliasing", result.text
    assert "kept from before it" in result.error_message, result.error_message
    honest = evaluate("matmul", get_task("matmul").template, shapes=shape)
    assert honest.ok, honest.text
    figures = honest.judge["timed"]["M=4096,N=14336,K=4096"]
    assert figures["fresh_inputs_ms"] < SEEN_SLACK * figures["seen_inputs_ms"], figures


def test_matmul_answered_by_cublas_is_rejected():
    result = evaluate("matmul", "import torch\n\n\ndef run(a, b):\n    return a @ b\n",
                      shapes=[(128, 256, 512)])
    assert result.error_kind == "torch_compute", result.text
    assert "aten::mm" in result.error_message


def test_candidates_run_contained_with_the_gpu_reachable(timed):
    """The timed clean candidate above ran inside the namespaces: the device nodes
    passed through (or, where namespaces are missing here, the feedback says so)."""
    result, _ = timed
    from kernelkb.optimizer.sandbox import jail

    expected = "namespaces" if jail.unavailable_reason() is None else "uncontained"
    assert result.containment.startswith(expected), result.containment
    assert result.timing_available


def test_a_side_stream_cheat_judged_against_an_incumbent_is_caught():
    """Interleaved with an incumbent, work the events miss makes the candidate read
    faster, so its shapes' GPU timestamps are read and refuse the figure."""
    parent = get_task("softmax").template
    result = evaluate("softmax", (BAD / "side_stream_waits.py").read_text(),
                      shapes=SHAPES[1:], parent_source=parent)
    assert not result.ok and result.error_kind == "cheat_timer", result.text


@pytest.mark.parametrize("task_name", ["attention", "matmul", "rmsnorm", "rope", "softmax",
                                       "swiglu"])
def test_every_naive_kernel_passes_the_judges_drawn_shape_on_the_gpu(task_name):
    """The judge's shape off the lists, every input condition on it, under no_grad and
    inference mode: no honest kernel is refused there (smallest and median sweep shapes,
    timed)."""
    task = get_task(task_name)
    shapes = list(task.shapes("representative"))[:2]
    result = evaluate(task_name, task.template, shapes=shapes)
    assert result.ok, result.text
    drawn = result.judge["drawn_shape"]
    assert drawn and drawn not in {task.shape_label(s) for s in task.shapes("all")}, drawn


@pytest.mark.parametrize("plant", ["known_shapes_only", "grad_mode_lazy"])
def test_a_kernel_safe_only_where_the_checks_look_is_caught_on_the_gpu(plant):
    result = evaluate("softmax", (BAD / f"{plant}.py").read_text(), shapes=SHAPES[1:])
    assert result.error_kind == "wrong_result", result.text
    assert "the judge" in result.error_message, result.error_message


def test_an_honest_kernel_beside_another_process_on_the_gpu_is_no_cheat():
    """A neighbour (another process's matmuls on the same GPU) stretches the GPU's own
    timestamps and the events alike: the naive kernels are correct, never cheat_*."""
    import subprocess
    import sys
    import time

    busy = ("import torch, time\na = torch.randn(8192, 8192, device='cuda', dtype=torch.float16)\n"
            "end = time.time() + 600\nwhile time.time() < end:\n    a @ a\n")
    neighbour = subprocess.Popen([sys.executable, "-c", busy])
    try:
        time.sleep(8)  # its context up and its matmuls running
        for name in ("softmax", "rmsnorm"):
            task = get_task(name)
            result = evaluate(name, task.render(task.default_config), shapes="tune",
                              parent_source=task.render(task.default_config))
            assert result.ok, result.text
            assert not (result.error_kind or "").startswith("cheat_"), result.text
    finally:
        neighbour.kill()
        neighbour.wait()
