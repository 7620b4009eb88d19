"""The report's per-shape table: start, best, eager, achieved rate and share of peak."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.report import _peak_note, _table_row, shape_table

SOFTMAX = get_task("softmax")


def sweep(ms: float) -> SimpleNamespace:
    label = SOFTMAX.shape_label((4096, 32768))
    return SimpleNamespace(timing_available=True, timings={label: (ms, 0.001)},
                           baseline_timings={label: 0.5})


def test_rows_carry_speedups_and_the_share_of_the_measured_peak() -> None:
    env = SimpleNamespace(mem_bandwidth_gbps=4000.0, peak_tflops=600.0)
    result = SimpleNamespace(task=SOFTMAX, dtype="float16", env=env,
                             best_sweep=sweep(0.1), start_sweep=sweep(0.2))
    (row,) = shape_table(result)
    nbytes = SOFTMAX.bytes_moved((4096, 32768), torch.float16)
    assert row["gbps"] == pytest.approx(nbytes / 1e-4 / 1e9)
    assert row["share"] == pytest.approx(row["gbps"] / 4000.0)
    text = _table_row(row, regression=False)
    assert "| 0.2000 | 0.1000 | 2.00x | 0.5000 | 5.00x |" in text
    assert f"{row['share']:.0%}" in text


def test_no_table_without_gpu_timing() -> None:
    untimed = SimpleNamespace(timing_available=False, timings={}, baseline_timings={})
    result = SimpleNamespace(task=SOFTMAX, dtype="float16", env=None, best_sweep=untimed,
                             start_sweep=untimed)
    assert shape_table(result) == []


def test_the_footnote_says_whether_the_peaks_were_measured_or_from_the_datasheet() -> None:
    datasheet = SimpleNamespace(gpu_name="NVIDIA H200", mem_bandwidth_gbps=4800.0,
                                peak_tflops=989.0)
    measured = SimpleNamespace(gpu_name="NVIDIA H200", mem_bandwidth_gbps=4219.4,
                               peak_tflops=696.0)
    assert "the datasheet" in _peak_note(datasheet) and "4800 GB/s" in _peak_note(datasheet)
    note = _peak_note(measured)
    assert "measured on this GPU" in note and "4219 GB/s" in note and "696 TFLOP/s" in note


def test_the_datasheet_figures_are_the_gpu_tables_row_of_the_whole_name() -> None:
    from kernelkb.optimizer.sandbox.hardware import datasheet

    assert datasheet("NVIDIA GH200 480GB") == (4000.0, 989.0)  # not the H200's row
    assert datasheet("NVIDIA H200") == (4800.0, 989.0)
    assert datasheet("NVIDIA L40S") == (864.0, 362.0) and datasheet("NVIDIA L4")[0] == 300.0
    assert datasheet("NVIDIA L40") == (864.0, 181.0)  # a name fragment once read it as an L4
    assert datasheet("NVIDIA H100 PCIe") == (2000.0, 756.0)
    assert datasheet("some unknown part") == (None, None)
