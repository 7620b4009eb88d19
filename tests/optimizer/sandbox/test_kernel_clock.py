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
