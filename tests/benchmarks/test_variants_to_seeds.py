"""benchmarks/variants_to_seeds.py: measured candidates become records of the space, each
against its nearest measured neighbour; candidates the loop could not render are left out."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.variants_to_seeds import build_records, measured
from kernelkb.kernels.base import get_task

SOFTMAX = get_task("softmax")
LONG, WIDE = "rows=4096,cols=32768", "rows=1024,cols=128256"
ENV = {"gpu_name": "NVIDIA H200", "arch": "sm_90", "sm_count": 132, "triton_version": "3.6.0",
       "torch_version": "2.11.0"}


def _file(path: Path, date: str, rows: list[dict]) -> Path:
    path.write_text(json.dumps({"date": date, "command": f"variants {date}", "rows": rows,
                                "env": {"gpu_name": "NVIDIA H200", "triton": "3.6.0",
                                        "torch": "2.11.0"}}))
    return path


def _row(shape: str, timed: dict[str, tuple[dict, float]], dropped=()) -> dict:
    return {"task": "softmax", "shape": shape,
            "configs": {label: cfg for label, (cfg, _) in timed.items()},
            "times": {f"ours: {label}": {"call": ms * 1.02, "graph": ms}
                      for label, (_, ms) in timed.items()},
            "dropped": {f"ours: {label}": "wrong output" for label in dropped}}


def test_records_of_the_space_against_their_nearest_neighbour(tmp_path: Path) -> None:
    plain = {"NUM_WARPS": 8, "LONG_ROW_BLOCK": 16384}
    hinted = {**plain, "L2_HINTS": True}
    persistent = {**hinted, "LONG_ROW_PERSISTENT": 1}  # a template constant off its value
    same_as_hinted = {**hinted, "LONG_ROW_PERSISTENT": 0}  # at its template value
    odd = {"NUM_WARPS": 3}  # a value outside the knob's
    old = _file(tmp_path / "variants_a_h200.json", "2026-11-30T10:00:00", [
        _row(LONG, {"plain": (plain, 0.20), "hinted": (hinted, 0.30)})])
    new = _file(tmp_path / "variants_b_h200.json", "2026-11-30T12:00:00", [
        _row(LONG, {"plain": (plain, 0.16), "hinted p0": (same_as_hinted, 0.13),
                    "p1": (persistent, 0.10), "odd": (odd, 0.05)}),
        _row(WIDE, {"plain": (plain, 0.19), "hinted p0": (same_as_hinted, 0.17)},
             dropped=("plain",))])
    entries = measured([new, old])["softmax"]
    assert len(entries) == 2  # plain and hinted; p1 and odd are not points of the space
    records = {r.edit.config["L2_HINTS"]: r for r in build_records("softmax", entries, ENV)}
    hint, base = records[True], records[False]
    # the newer file's times win, a dropped shape is left out
    assert {t.shape: t.graph_ms for t in hint.feedback.timings} == {LONG: 0.13, WIDE: 0.17}
    assert {t.shape: t.graph_ms for t in base.feedback.timings} == {LONG: 0.16}
    assert abs(hint.feedback.speedup_vs_parent - 0.16 / 0.13) < 1e-9  # on the shared shape
    assert hint.verdict == "improved" and base.verdict == "regressed"
    assert hint.edit.summary.startswith("set L2_HINTS False -> True")
    assert "+L2_HINTS = True" in hint.edit.diff
    assert hint.env.gpu_name == "NVIDIA H200" and hint.env.arch == "sm_90"
