"""The GPU busy time from the GPU's own timestamps (kernel_clock.py): the union of the
kernels' intervals, so streams that overlap are not counted twice; the rule that a
reported GPU time far under it is refused. The profiler itself runs in test_gpu.py."""

from __future__ import annotations

import pytest

from kernelkb.optimizer.sandbox import kernel_clock


@pytest.mark.parametrize(("spans", "length"), [
    ([(0.0, 10.0)], 10.0),
    ([(0.0, 10.0), (20.0, 25.0)], 15.0),  # a gap is not busy
    ([(0.0, 10.0), (5.0, 12.0)], 12.0),  # two streams overlapping: counted once
    ([(0.0, 10.0), (2.0, 3.0), (11.0, 12.0)], 11.0),  # one inside another
])
def test_busy_time_is_the_union_of_the_kernels_intervals(spans, length):
    assert kernel_clock.union_length(spans) == pytest.approx(length)


def test_a_reported_time_far_under_the_busy_time_is_refused():
    assert kernel_clock.under_busy_time(0.01, 0.1)  # events bracket a tenth of the work
    assert not kernel_clock.under_busy_time(0.1, 0.1)
    assert not kernel_clock.under_busy_time(0.12, 0.1)  # L2 flushed before: slower
    assert not kernel_clock.under_busy_time(0.01, None)  # no timestamps: no verdict
    # only events around the same calls may call the timestamps a lie
    hidden = kernel_clock.Reading(busy_ms=0.1, kernels=frozenset(), bracketed_ms=0.01)
    stretched = kernel_clock.Reading(busy_ms=0.5, kernels=frozenset(), bracketed_ms=0.55)
    assert kernel_clock.hides_work(hidden) and not kernel_clock.hides_work(stretched)
    assert not kernel_clock.hides_work(kernel_clock.Reading(0.1, frozenset()))


def test_an_unsynchronised_reading_the_timestamps_contradict_is_dropped():
    """With evaluations beside each other, an honest rmsnorm read 0.0077 ms on the stream
    clock and 0.567 ms synchronised on the H200 (another process's kernels), and its
    verdict was set aside. Where the GPU's own timestamps saw this process busy about as
    long as the stream clock says, that reading is dropped; work on a stream never joined
    back shows in the timestamps, and the reading stays."""
    from kernelkb.optimizer.sandbox.worker import _unsync_kept

    reading = "0.0077 ms on the stream clock but 0.5670 ms with the device synchronised"
    unsync = {"a=1": reading, "b=1": reading, "c=1": reading}
    timings = {"a=1": [0.0077, 0.0001], "b=1": [0.0077, 0.0001], "c=1": [0.0077, 0.0001]}
    busy = {"a=1": 0.0070, "b=1": 0.2, "c=1": None}  # b: hidden work; c: no timestamps
    assert _unsync_kept(unsync, timings, busy) == [f"(b=1) {reading}", f"(c=1) {reading}"]


def test_the_timestamps_are_read_where_a_figure_could_claim_a_gain():
    """A process's first CUPTI session costs seconds, so a shape whose interleaved
    interval rules out a gain over the incumbent beyond the noise floor is not read;
    one timed alone, one whose interval allows a gain, and one with an unsynchronised
    reading to clear are."""
    from kernelkb.optimizer.sandbox.worker import _may_gain

    comparison = {"noise_floor": 0.01, "shapes": {
        "aa=1": {"low": 0.994, "high": 1.006},  # the same kernel: within the floor
        "slower=1": {"low": 0.85, "high": 0.86},
        "faster=1": {"low": 1.2, "high": 1.3},  # e.g. work the events do not bracket
        "maybe=1": {"low": 0.999, "high": 1.02},
    }}
    assert not _may_gain("aa=1", comparison, set())
    assert not _may_gain("slower=1", comparison, set())
    assert _may_gain("faster=1", comparison, set())
    assert _may_gain("maybe=1", comparison, set())
    assert _may_gain("aa=1", comparison, {"aa=1"})  # an unsynchronised reading to clear
    assert _may_gain("alone=1", {}, set())  # no incumbent: timed alone


def test_a_librarys_compute_kernel_is_foreign_its_own_kernels_and_copies_are_not():
    own = {"softmax_kernel", "void"}  # a kernel may be called "void"; it is still one word
    names = ["softmax_kernel", "Memset (Device)", "Memcpy DtoD (Device -> Device)",
             "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<half>>",
             "void at::native::(anonymous namespace)::CatArrayBatchedCopy<c10::Half>",
             "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::Half>",
             "nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_NNT", "triton_red_fused__softmax_0",
             "an_unknown_name"]
    assert kernel_clock.foreign_kernels(names, own) == [
        "nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_NNT", "triton_red_fused__softmax_0",
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::Half>"]
    assert kernel_clock.foreign_kernels(["softmax_kernel"], set()) == []  # not a library's


def test_the_reader_is_named_by_a_setting_and_a_bad_name_is_refused(monkeypatch):
    """KERNELKB_GPU_TIMESTAMPS: checked in the evaluator's process, where the user set it;
    auto takes the CUPTI bindings only where they import."""
    monkeypatch.setenv("KERNELKB_GPU_TIMESTAMPS", "profiler")
    assert kernel_clock.preference() == "profiler"
    monkeypatch.delenv("KERNELKB_GPU_TIMESTAMPS")
    assert kernel_clock.preference() == "auto"
    assert kernel_clock.reader_for("auto") == ("cupti" if kernel_clock._cupti else "profiler")
    monkeypatch.setenv("KERNELKB_GPU_TIMESTAMPS", "nsight")
    with pytest.raises(ValueError, match="KERNELKB_GPU_TIMESTAMPS='nsight': one of auto"):
        kernel_clock.preference()


def test_a_bad_reader_setting_stops_the_evaluation_before_it_starts(monkeypatch):
    from kernelkb.kernels.discovery import get_task
    from kernelkb.optimizer.sandbox import evaluate

    monkeypatch.setenv("KERNELKB_GPU_TIMESTAMPS", "nsight")
    with pytest.raises(ValueError, match="KERNELKB_GPU_TIMESTAMPS"):
        evaluate("softmax", get_task("softmax").template, shapes=[(1, 7)], seeds=1)
