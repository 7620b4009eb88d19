"""benchmarks/dram_traffic.py reads ncu's raw page: kernels of one call summed under the
NVTX-named implementation, a dropped peer keeps its reason, figures are per op byte."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import torch

from benchmarks.dram_traffic import measure
from kernelkb.kernels.discovery import get_task

CASE = 'softmax|rows=4,cols=128|{"NUM_WARPS": 2}'
HEAD = ["ID", "Kernel Name", "dram__bytes_read.sum", "dram__bytes_write.sum",
        "lts__t_sector_hit_rate.pct", "gpu__time_duration.sum"]


def test_the_page_becomes_bytes_per_op_byte(tmp_path: Path) -> None:
    task = get_task("softmax")
    op_bytes = task.bytes_moved(task.parse_shape("rows=4,cols=128"), torch.float16)
    half = op_bytes / 2  # input bytes = output bytes for softmax
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_ALL)
    writer.writerows([HEAD, ["", "", "byte", "byte", "%", "nsecond"],
                      ["0", "0|ours/pass_one", f"{half:,.0f}", "0", "40", "1,000"],
                      ["1", "0|ours/pass_two", f"{half / 2:,.0f}", f"{half:,.0f}", "60", "1000"],
                      ["2", "0|eager/cunn_SoftMax", f"{half:,.0f}", f"{half:,.0f}", "50", "500"],
                      ["3", "unnamed_kernel_outside_ranges", "1", "1", "1", "1"]])
    raw = tmp_path / "page.csv"
    raw.write_text("==PROF== Connected\n" + buffer.getvalue())
    raw.with_suffix(".log").write_text("KKB " + json.dumps(
        {"case": 0, "impl": "liger", "error": "dropped: cannot run: too wide"}) + "\n")
    rows = {r["impl"]: r for r in measure([CASE], raw)}
    assert list(rows) == ["ours", "eager", "liger"]
    ours = rows["ours"]
    assert ours["kernels"] == 2 and ours["read_over_input"] == 1.5
    assert ours["write_over_output"] == 1.0 and ours["l2_hit_pct"] == 50.0
    assert ours["gpu_us"] == 2.0 and ours["achieved_gbps"] == 2.5 * half / 2000
    assert rows["eager"]["read_over_input"] == 1.0
    assert rows["liger"]["error"] == "dropped: cannot run: too wide"
