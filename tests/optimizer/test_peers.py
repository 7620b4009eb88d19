"""Peers in the report: the best possible peer per shape, impossible times set aside."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from kernels.base import get_task
from optimizer.peers import best_peer, time_peers, trustworthy
from optimizer.report import peer_lines

SOFTMAX = get_task("softmax")
SHAPE = (4096, 32768)
LABEL = SOFTMAX.shape_label(SHAPE)
PEAKS = {"mem_bandwidth_gbps": 4000.0, "peak_tflops": 600.0}


def test_a_peer_faster_than_the_roofline_is_not_the_best_peer() -> None:
    floor = SOFTMAX.bytes_moved(SHAPE, torch.float16) / 4000e9 * 1e3  # ms at peak bandwidth
    times = {"eager": 3 * floor, "compiled": 1.5 * floor, "liger": 0.5 * floor, "x": None}
    assert set(trustworthy(times, floor)) == {"eager", "compiled"}
    assert best_peer(SOFTMAX, "float16", SHAPE, times, PEAKS) == ("compiled", 1.5 * floor)


def test_the_report_lists_every_peer_with_its_speedup() -> None:
    best = SimpleNamespace(timing_available=True, timings={LABEL: (0.2, 0.001)})
    result = SimpleNamespace(task=SOFTMAX, dtype="float16", best_sweep=best,
                             env=SimpleNamespace(**PEAKS),
                             peer_timings={LABEL: {"eager": 0.5, "compiled": 0.3}})
    text = "\n".join(peer_lines(result))
    assert "| compiled | eager |" in text  # every peer has a column
    assert "0.5000 (2.50x)" in text and "1.50x (compiled)" in text


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_peers_are_timed_on_the_gpu() -> None:
    times = time_peers(SOFTMAX, "float16", [(1024, 4096)])
    label = SOFTMAX.shape_label((1024, 4096))
    assert times[label]["eager"] > 0 and times[label]["compiled"] > 0


def test_an_impossible_peer_time_is_marked_in_the_report() -> None:
    floor = SOFTMAX.bytes_moved(SHAPE, torch.float16) / 4000e9 * 1e3
    best = SimpleNamespace(timing_available=True, timings={LABEL: (2 * floor, 0.0)})
    result = SimpleNamespace(task=SOFTMAX, dtype="float16", best_sweep=best,
                             env=SimpleNamespace(**PEAKS),
                             peer_timings={LABEL: {"liger": 0.5 * floor}})
    text = "\n".join(peer_lines(result))
    assert "under the roofline: ignored" in text and text.rstrip().count("| - |") == 1
