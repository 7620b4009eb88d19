"""benchmarks/transfer_h200.py end to end on small generated sweep journals: two regimes
of softmax in float16 and bfloat16, times from the launch plus seeded noise. Nothing is
asserted about who wins; every case, study and method is reported (the benchmark itself
asserts that a held-out regime's or dtype's rows never reach its training rows)."""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path

import pytest

from benchmarks import transfer_h200
from kernelkb.kernels.discovery import get_task

REGIMES = {"short_rows": "rows=4096,cols=1024", "long_rows": "rows=64,cols=65536"}


def write_journal(folder: Path, dtype: str, seed: int, gpu: str = "NVIDIA H200") -> None:
    task = get_task("softmax")
    rng = random.Random(seed)
    lines = [{"header": {"task": "softmax", "dtype": dtype,
                         "env": {"gpu_name": gpu, "arch": "sm_90", "sm_count": 132}}}]
    for regime, label in REGIMES.items():
        for config in itertools.islice(task.space(), 0, 40):
            launch = task.launch(config, task.parse_shape(label), dtype)
            t = (1 + abs(math.log2(launch.threads_per_program) - 8) * 0.2) * (
                1 + 0.05 * rng.random())
            lines.append({"task": "softmax", "dtype": dtype, "regime": regime, "ok": True,
                          "config": config, "shapes": [label],
                          "comparison": {"shapes": {label: {"candidate_ms": t}}}})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"softmax_{dtype}.jsonl").write_text("\n".join(json.dumps(x) for x in lines))


def test_regime_and_dtype_studies_on_small_journals(tmp_path: Path) -> None:
    write_journal(tmp_path / "sweeps", "float16", 0)
    write_journal(tmp_path / "sweeps", "bfloat16", 1)
    rows = transfer_h200.load_sweeps(tmp_path / "sweeps")
    assert len(rows) == 2 * 2 * 40
    assert transfer_h200.main(["--sweeps", str(tmp_path / "sweeps"), "--out",
                               str(tmp_path / "out"), "--model-seeds", "2"]) == 0
    payload = json.loads((tmp_path / "out" / "transfer_h200.json").read_text())
    studies = {c["study"] for c in payload["cases"]}
    assert studies == {"leave one regime out", "float16 -> bfloat16"}
    assert len(payload["cases"]) == 4 + 2  # 2 regimes x 2 dtypes, then 2 bf16 targets
    for case in payload["cases"]:
        for method in transfer_h200.METHODS:
            assert 1 <= case[method]["e3"]["median"] <= case["configs"], method
        assert case["walk"]["runs"] == 2 and case["cold"]["runs"] == 20
    text = (tmp_path / "out" / "transfer_h200.md").read_text()
    assert "## leave one regime out" in text and "## float16 -> bfloat16" in text


@pytest.mark.slow  # > 20 s on two cores
def test_another_cards_regimes_are_targets_with_the_h200s_rows_known(tmp_path: Path) -> None:
    write_journal(tmp_path / "sweeps", "float16", 0)
    write_journal(tmp_path / "sweeps", "bfloat16", 1)
    write_journal(tmp_path / "h100", "float16", 2, gpu="NVIDIA H100 80GB HBM3")
    other = transfer_h200.load_sweeps(tmp_path / "h100")
    assert {r.gpu for r in other} == {"H100 float16"}
    assert transfer_h200.main(["--sweeps", str(tmp_path / "sweeps"), "--out",
                               str(tmp_path / "out"), "--model-seeds", "2",
                               "--other-sweeps", str(tmp_path / "h100")]) == 0
    payload = json.loads((tmp_path / "out" / "transfer_h200.json").read_text())
    cards = [c for c in payload["cases"] if c["study"] == "H200 -> another card (H100)"]
    assert sorted(c["case"] for c in cards) == [
        "softmax long_rows float16 (H200 -> H100)", "softmax short_rows float16 (H200 -> H100)"]
    for case in cards:
        for method in transfer_h200.METHODS:
            assert 1 <= case[method]["e3"]["median"] <= case["configs"], method
    assert "h100/softmax_float16.jsonl" in payload["journals"]
