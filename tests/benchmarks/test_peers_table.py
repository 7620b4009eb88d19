"""benchmarks/peers.py's table from measured rows: dropped implementations keep their
reason, a call figure under the roofline is a failure, the best peer is a possible one."""

from __future__ import annotations

import torch

from benchmarks.peers import analyse, markdown
from kernelkb.kernels.discovery import get_task

TASK = get_task("softmax")
SHAPE = TASK.sweep_shapes[0]
PEAKS = {"mem_bandwidth_gbps": 4000.0, "peak_tflops": 600.0}
ENV = {"gpu_name": "TEST GPU", "triton_version": "t", "torch_version": "p", "cuda_version": "c"}


def _row(floor_share: dict[str, tuple[float, float | None]], dropped: dict[str, str]) -> dict:
    floor = TASK.bytes_moved(SHAPE, torch.float16) / 4000e9 * 1e3
    row = {"task": "softmax", "shape": TASK.shape_label(SHAPE), "dtype": "float16",
           "times": {k: {"call": c * floor, "graph": g and g * floor}
                     for k, (c, g) in floor_share.items()},
           "dropped": dropped}
    analyse(row, TASK, SHAPE, PEAKS)
    return row


def test_the_table_shows_both_figures_drops_and_failures() -> None:
    row = _row({"naive triton": (2.0, 1.0), "eager": (4.0, 3.0), "compiled": (3.0, 1.5),
                "liger": (0.5, 0.4)}, {"other": "wrong output (x): 3 of 9 elements over"})
    assert row["below floor"] == {"liger": row["times"]["liger"]["call"]}
    assert row["best peer"]["name"] == "compiled"  # liger's figure is impossible
    assert abs(row["naive vs best peer"] - 1.5) < 1e-9
    assert row["best peer graph"]["name"] == "liger"  # graph figures: no floor (L2 warm)
    text = markdown([row], ENV, PEAKS, "float16", {"softmax/eager": "torch.softmax"}, "cmd")
    assert "| shape | naive triton | eager | compiled | liger | other | naive % of peak" in text
    assert "dropped [1]" in text and "1. other at " in text and "3 of 9 elements" in text
    assert "**BELOW FLOOR**" in text and "**Failures to explain**" in text
    assert "**eager**: torch.softmax" in text
    assert "geomean naive vs best peer: 1.50x over 1 shapes" in text
