"""benchmarks/verdict_noise.py's bookkeeping: the padded variant does strictly more work,
a resumed run asks only for what the earlier one lacks (failed evaluations do not
count), and the table counts verdicts per rule and the fresh machine's first minutes."""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.verdict_noise import (
    _need,
    _with_earlier,
    markdown,
    slower_source,
    summarise,
)
from kernelkb.kernels.discovery import get_task


def _row(interleaved: str, previous: str, ratio: float, *, ok: bool = True,
         t_s: float = 300.0, fresh: bool = False) -> dict:
    if not ok:
        return {"ok": False, "wall_s": 9.0, "error": "out_of_memory: ..."}
    return {"ok": True, "wall_s": 12.0, "t_s": t_s, "fresh_machine": fresh,
            "interleaved": interleaved, "previous": previous, "locked_s": 2.5,
            "gpu_phase_s": 1.5, "call_ms": 0.1,
            "comparison": {"ratio": ratio, "low": ratio * 0.995, "high": ratio * 1.005,
                           "rounds": 12}}


def test_the_slower_variant_adds_a_copy_to_every_call() -> None:
    source = slower_source(get_task("rmsnorm").template, share=0.25)
    tree = ast.parse(source)
    runs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run"]
    assert len(runs) == 2  # the naive run(), then the wrapper that pads it
    assert "* 0.25" in source and "_verdict_noise_pad[" in source


def test_summary_counts_each_rule_and_its_right_share() -> None:
    rows = [_row("neutral", "regressed", 1.001), _row("neutral", "neutral", 0.998),
            _row("improved", "improved", 1.02), _row("neutral", "neutral", 1.0, ok=False)]
    s = summarise(rows, "neutral")
    assert s["evaluations"] == 3 and s["failed"] == 1
    assert s["interleaved"] == {"improved": 1, "neutral": 2}
    assert s["previous"] == {"improved": 1, "neutral": 1, "regressed": 1}
    assert s["interleaved_right_share"] == 2 / 3 and s["previous_right_share"] == 1 / 3
    assert s["ratio_range"] == [0.998, 1.02] and s["locked_s_median"] == 2.5


def test_a_resumed_run_asks_only_for_what_is_missing() -> None:
    args = argparse.Namespace(evals=30, slower=10)
    earlier = {"aa": [_row("neutral", "neutral", 1.0)] * 12 + [_row("", "", 0, ok=False)] * 5,
               "slower": [_row("regressed", "regressed", 0.8)] * 10}
    assert _need(earlier, args) == {"aa": 18, "slower": 0}
    assert _need(None, args) == {"aa": 30, "slower": 10}


def test_tasks_a_resumed_run_did_not_touch_are_kept() -> None:
    earlier = {"rows": {"softmax": {"aa": [1], "slower": []}},
               "tasks": {"softmax": {"aa": "kept"}}}
    report = _with_earlier({"rows": {"rope": {}}, "tasks": {"rope": {}}}, earlier)
    assert report["tasks"]["softmax"] == {"aa": "kept"} and "rope" in report["rows"]


def test_the_table_reports_the_fresh_machine_on_its_own() -> None:
    aa = [_row("neutral", "regressed", 1.0, t_s=30, fresh=True),
          _row("regressed", "regressed", 0.98, t_s=60, fresh=True),
          _row("neutral", "neutral", 1.0, t_s=30, fresh=False),  # a warm run's first minute
          _row("neutral", "neutral", 1.0, t_s=500, fresh=True)]
    slower = [_row("regressed", "neutral", 0.8)]
    report = {"gpu": "NVIDIA H200", "command": "python benchmarks/verdict_noise.py",
              "commands": ["python benchmarks/verdict_noise.py --fresh-machine"],
              "evals": 4, "slower": 1,
              "tasks": {"softmax": {"aa": summarise(aa, "neutral"),
                                    "slower": summarise(slower, "regressed")}},
              "rows": {"softmax": {"aa": aa, "slower": slower}}}
    text = markdown(report)
    assert "| softmax | aa | 4 | neutral 3, regressed 1 | 75% |" in text
    assert "| softmax | slower | 1 | regressed 1 | 100% | neutral 1 | 0% |" in text
    assert "freshly started machine (`--fresh-machine`): 2, of which 1 not neutral" in text


def _noise_cli(*args: str) -> subprocess.CompletedProcess:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # the GPU check comes after the tasks
    return subprocess.run([sys.executable, str(root / "benchmarks" / "verdict_noise.py"),
                           *args], capture_output=True, text=True, env=env, timeout=120)


def test_ones_own_task_is_found_and_a_misspelt_one_named() -> None:
    """An A/A run of a user's own task: its folder is read (--tasks-dir), and a name
    that is no task fails at once with the known ones, before any GPU work."""
    root = Path(__file__).resolve().parents[2]
    found = _noise_cli("--tasks-dir", str(root / "benchmarks" / "new_tasks"),
                       "--tasks", "layernorm")
    assert found.returncode != 0 and "needs a CUDA GPU" in found.stderr, found.stderr
    missing = _noise_cli("--tasks", "layernrm")
    assert missing.returncode != 0 and "unknown task 'layernrm'" in missing.stderr
    assert "softmax" in missing.stderr, missing.stderr
