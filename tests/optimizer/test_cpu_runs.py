"""CPU runs that tell the truth: the final sweep runs the task's CPU shapes on a CPU, the
report says plainly that nothing was timed, and untimed CPU records are no hardware
evidence (bootstrap's similar hardware, insights, the ranker's rows).

Stores are real SQLite (vectors off); the whole-CLI run on a CPU is the slow test."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kb_testdata import record_dict  # noqa: E402

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.report import sweep_line
from kernelkb.optimizer.sandbox import resolve_shapes, sweep_shape_set
from kernelkb.optimizer.sandbox.result import EvalResult
from kernelkb.retrieval.prediction import measured_records
from kernelkb.service import LocalKnowledge

REPO_ROOT = Path(__file__).resolve().parents[2]

ROPE = get_task("rope")
SWIGLU = get_task("swiglu")  # the whole-CLI run: its CPU sweep is the quickest (~35 s)
CPU_ENV = {"gpu_name": "cpu-interpreter", "arch": "cpu", "triton_version": "3.6.0",
           "torch_version": "2.11.0"}


def test_the_sweep_runs_the_cpu_shapes_on_a_cpu_and_every_shape_on_a_gpu() -> None:
    name, shapes = resolve_shapes(ROPE, sweep_shape_set("auto", on_gpu=False), False)
    assert (name, shapes) == ("cpu+edge", [*ROPE.cpu_shapes, *ROPE.edge_shapes])
    assert resolve_shapes(ROPE, sweep_shape_set("auto", on_gpu=True), True)[1] == \
        list(ROPE.shapes("all"))
    assert sweep_shape_set("sweep", on_gpu=False) == "sweep"  # an explicit set stands


def test_the_sweep_line_says_what_was_checked_and_that_nothing_was_timed() -> None:
    labels = [ROPE.shape_label(s) for s in ROPE.cpu_shapes]
    passed = EvalResult(ok=True, stage="correctness", task_name="rope", dtype="float16",
                        shape_set="cpu+edge", shapes_checked=labels,
                        timing_note="CPU interpreter: correctness only, no GPU timing")
    line = sweep_line(passed)
    assert line.startswith(f"correctness: pass on {len(labels)} shapes (cpu+edge: {labels[0]}")
    assert line.endswith("; not timed (CPU interpreter: correctness only, no GPU timing)")
    timed_out = EvalResult(ok=False, stage="run", task_name="rope", dtype="float16",
                           shape_set="all", shapes_checked=labels, error_kind="timeout",
                           error_message="no result after 60 s while running (4096x4096)")
    text = sweep_line(timed_out)
    assert text.startswith("correctness: FAIL (timeout: no result after 60 s")
    assert f"{len(labels)} shapes checked before it" in text
    assert "CPU interpreter" not in text  # a GPU run that timed out says why, not "CPU"
    assert text.endswith("; not timed (it failed before timing)")


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) with vectors off: these tests read SQL only."""
    return {"vectors": False}


@pytest.fixture
def mixed_store(knowledge: LocalKnowledge) -> LocalKnowledge:
    """Timed H200 and A100 records of softmax beside untimed CPU-interpreter ones."""
    kb = knowledge
    rows = [record_dict(hw="H200", summary="whole-row tile", config={"BLOCK_SIZE": 4096}),
            record_dict(hw="A100", summary="two rows a program", categories=("tiling",),
                        config={"BLOCK_SIZE": 2048}),
            record_dict(hw="H200", verdict="failed", evidence="claimed", speedup=None,
                        error_kind="compile", summary="too much shared memory",
                        config={"BLOCK_SIZE": 65536})]
    for n, verdict in enumerate(("improved", "neutral", "incorrect")):
        cpu = record_dict(verdict=verdict, evidence="verified" if verdict != "incorrect"
                          else "claimed", speedup=None, summary=f"cpu round {n}",
                          categories=("warps_stages",), config={"NUM_WARPS": 2 ** (n + 1)},
                          run="cpu-run", iteration=n + 1)
        cpu["env"] = dict(CPU_ENV)
        rows.append(cpu)
    report = kb.ingest(rows)
    assert len(report.accepted) == 6, report.rejected
    return kb


def test_untimed_cpu_records_are_no_hardware_evidence(mixed_store: LocalKnowledge) -> None:
    plan = mixed_store.bootstrap({"gpu_name": "NVIDIA H100 80GB HBM3"}, include_own=True)
    names = [m.gpu_name for m in plan.similar_hardware]
    assert names and "cpu-interpreter" not in names
    assert set(names) == {"NVIDIA H200", "NVIDIA A100-SXM4-80GB"}
    report = mixed_store.insights(op_type="softmax")
    assert report.total == 3  # the GPU rows only
    assert "warps_stages" not in {c.category for c in report.categories}
    assert "untimed CPU-interpreter rows left out" in report.basis
    asked = mixed_store.insights(gpu_name="cpu-interpreter")  # asked for by name: shown
    assert asked.total == 3
    with mixed_store.session() as session:
        rows = measured_records(session, "softmax")
    assert rows and all(r.env.arch != "cpu" for r in rows)
    assert {r.verdict for r in rows} == {"improved", "failed"}


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_cpu_optimize_run_checks_its_cpu_shapes_and_says_nothing_was_timed(
        tmp_path: Path) -> None:
    """The newcomer's first command, on a CPU: exit 0, the sweep passes on the task's CPU
    and edge shapes, the report says nothing was timed, bootstrap never names the CPU."""
    env = {**os.environ, "KERNELKB_HOME": str(tmp_path / "home"), "KERNELKB_VECTORS": "false",
           "PYTHONPATH": str(REPO_ROOT)}
    run = subprocess.run([sys.executable, "-m", "kernelkb", "optimize", "swiglu", "--max-iters",
                          "1", "--shapes", "cpu", "--timeout-s", "600",
                          "--out", str(tmp_path / "runs")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    said = run.stdout + run.stderr
    # said before the first round, not only at the end; untimed rounds stay out of the store
    assert said.index("nothing will be timed") < said.index("nothing was timed")
    assert "not the store (--keep-untimed stores them)" in said
    (journal,) = (tmp_path / "runs").glob("*/journal.jsonl")
    assert journal.read_text().strip()
    (report,) = (tmp_path / "runs").glob("*/report.md")
    text = report.read_text()
    assert "**Nothing in this report was timed.**" in text
    checked = len(SWIGLU.cpu_shapes) + len(SWIGLU.edge_shapes)
    # one sweep per regime the CPU shapes reach; together they cover the cpu + edge shapes
    passed = [int(n) for n in re.findall(r"correctness: pass on (\d+) shapes", text)]
    assert passed and sum(passed) == checked, (passed, checked)
    assert "FAIL" not in text
    assert not (tmp_path / ".kernelkb").exists()
    plan = subprocess.run([sys.executable, "-m", "kernelkb", "bootstrap", "--op", "swiglu",
                           "--gpu", "H100", "--json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert plan.returncode == 0, plan.stderr[-2000:]
    similar = [m["gpu_name"] for m in json.loads(plan.stdout)["similar_hardware"]]
    assert similar and "cpu-interpreter" not in similar
