"""``kernelkb revalidate`` on the CPU interpreter: the best distinct configurations are
re-run through the real sandbox, recorded as experiences and journaled; nothing is timed
and the output says so. The drift arithmetic is checked on a hand-built timed result."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from kernelkb.cli import revalidate as revalidate_command
from kernelkb.kb.record import ExperienceRecord
from kernelkb.kb.seeds import read_jsonl
from kernelkb.kb.settings import Settings
from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.revalidate import Known, _drift, best_known, revalidate, table
from kernelkb.optimizer.sandbox.result import EvalResult
from kernelkb.service import LocalKnowledge

BASE = {"BLOCK_SIZE": 0, "NUM_WARPS": 4, "NUM_STAGES": 1, "ROWS_PER_PROGRAM": 1,
        "ONLINE": False}
# BASE predates softmax's LONG_ROW_BLOCK and L2_HINTS variants: revalidate completes it with
# their first values
WHOLE = {**BASE, "LONG_ROW_BLOCK": 0, "L2_HINTS": False}
TINY = [(4, 64)]


def _record(config: dict[str, Any], speedup: float, gpu: str = "NVIDIA H200",
            triton: str = "3.5.0", run: str = "r1") -> dict[str, Any]:
    timings = [{"shape": "rows=4,cols=64", "median_ms": 0.01 / speedup, "iqr_ms": 0.0001,
                "baseline_ms": 0.01}]
    return {
        "run_id": run, "iteration": 1,
        "task": {"op_type": "softmax", "task_id": "softmax", "dtype": "float16"},
        "env": {"gpu_name": gpu, "arch": "sm_90", "triton_version": triton,
                "torch_version": "2.9.0"},
        "edit": {"summary": f"config {config}", "categories": ["warps_stages"],
                 "config": config, "child_hash": f"child-{run}-{sorted(config.items())}"},
        "feedback": {"stage": "performance", "timing_available": True, "timings": timings,
                     "time_ms": 0.01 / speedup, "baseline_ms": 0.01,
                     "speedup_vs_baseline": speedup, "text": "fabricated"},
        "verdict": "improved",
        "provenance": {"agent": "test", "source": "tests (fabricated)"},
    }


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) without vectors: revalidate reads by task, not by
    meaning."""
    return {"vectors": False}


@pytest.fixture
def store(knowledge: LocalKnowledge) -> LocalKnowledge:
    """``knowledge`` holding softmax records: three distinct whole configurations (one
    measured on two GPUs) and two that revalidate skips."""
    report = knowledge.ingest([
        _record({**BASE, "NUM_WARPS": 8}, 3.0),
        _record({**BASE, "NUM_WARPS": 8}, 2.0, gpu="NVIDIA A100", run="r2"),  # same config
        _record({**BASE, "ROWS_PER_PROGRAM": 2}, 2.5, run="r3"),
        _record({**BASE, "NUM_WARPS": 2}, 1.1, run="r4"),
        _record({"NUM_WARPS": 16}, 9.0, run="r5"),  # not a whole config of the task: skipped
        _record({**BASE, "NUM_WARPS": 3}, 8.0, run="r6"),  # not in the space: skipped
    ])
    assert not report.rejected
    return knowledge


def test_best_distinct_configs_are_chosen_and_their_stored_figures_kept(
        store: LocalKnowledge) -> None:
    records = [r for r in store.list(task_id="softmax", limit=50).items]
    known = best_known(records, get_task("softmax"), "NVIDIA A100", top=2)
    assert [k.config for k in known] == [{**WHOLE, "NUM_WARPS": 8},
                                         {**WHOLE, "ROWS_PER_PROGRAM": 2}]
    assert known[0].best.env.gpu_name == "NVIDIA H200"  # its best figure, any GPU
    assert known[0].reference.env.gpu_name == "NVIDIA A100"  # compared with this GPU's
    assert known[1].same_gpu is None and known[1].reference is known[1].best


@pytest.mark.slow  # whole evaluations in the interpreter (~40 s on 2 cores)
def test_revalidate_on_cpu_checks_correctness_and_times_nothing(store: LocalKnowledge) -> None:
    result = revalidate(get_task("softmax"), store, top=2, shapes=TINY, seeds=1,
                        command="pytest")
    assert not result.timed and result.shapes == ["rows=4,cols=64"]
    assert [r.known.config for r in result.rows] == [{**WHOLE, "NUM_WARPS": 8},
                                                     {**WHOLE, "ROWS_PER_PROGRAM": 2}]
    start, *rechecked = result.records
    assert start.provenance.round_kind == "baseline" and start.edit.config == {}
    for row, record in zip(result.rows, rechecked, strict=True):
        assert record.provenance.round_kind == "revalidate"
        assert record.provenance.agent == "revalidate"
        assert record.edit.config == row.known.config and record.edit.diff
        assert record.evidence == "verified" and record.verdict.value == "neutral"
        assert "not timed (CPU interpreter)" in record.feedback.text
        assert row.known.reference.id in record.feedback.text
        assert row.time_drift is None and row.speedup_now is None
    text = table(result)
    assert "NOTHING WAS TIMED" in text and "cpu-interpreter" in text


@pytest.mark.slow  # whole evaluations in the interpreter (~20 s quiet on 2 cores)
def test_cli_journals_records_that_ingest_elsewhere(store: LocalKnowledge, tmp_path: Path,
                                                    monkeypatch) -> None:
    store.close()  # the CLI opens it itself, from the environment
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(store.settings.data_dir))
    monkeypatch.setenv("KERNELKB_VECTORS", "false")
    journal = tmp_path / "journal.jsonl"
    args = argparse.Namespace(task="softmax", top=1, dtype="float16", shapes="cpu", seeds=1,
                              timeout_s=120.0, journal=journal)
    status, text = revalidate_command.execute(args)
    assert status == 0, text
    assert "NOTHING WAS TIMED" in text and f"kernelkb ingest {journal}" in text
    lines = [json.loads(x) for x in journal.read_text().splitlines()]
    assert [x["provenance"]["round_kind"] for x in lines] == ["baseline", "revalidate"]
    # a second, empty store: the journal's records load into a store that never had them
    fresh = LocalKnowledge(Settings(data_dir=tmp_path / "fresh", vectors=False,
                                    seeds_dir=tmp_path / "none"))
    assert len(fresh.ingest(read_jsonl(journal)).accepted) == 2
    bad = argparse.Namespace(**{**vars(args), "task": "no_such_task"})
    status, text = revalidate_command.execute(bad)
    assert status == 2 and "no_such_task" in text


@pytest.mark.parametrize("gpu", ["NVIDIA H200", "NVIDIA A100"])
def test_drift_is_time_over_the_shapes_both_timed(gpu: str) -> None:
    stored = ExperienceRecord.model_validate({
        **_record({**BASE, "NUM_WARPS": 8}, 2.0),
        "feedback": {"stage": "performance", "timing_available": True, "time_ms": 1.4,
                     "speedup_vs_baseline": 2.0, "text": "",
                     "timings": [{"shape": "a", "median_ms": 1.0}, {"shape": "b",
                                                                   "median_ms": 2.0}]}})
    now = EvalResult(ok=True, stage="performance", task_name="softmax", dtype="float16",
                     shape_set="custom", timing_available=True, speedup_vs_baseline=1.8,
                     timings={"a": (1.1, 0.01), "b": (2.2, 0.02), "c": (5.0, 0.1)})
    env = stored.env.model_copy(update={"gpu_name": gpu, "triton_version": "3.6.0"})
    drift, text = _drift(Known(dict(stored.edit.config), stored), now, env)
    assert drift == pytest.approx(1.1)
    assert "+10.0% over 2 shapes" in text and "Triton 3.5.0 -> 3.6.0" in text
    assert "2.00x then, 1.80x now" in text
    assert ("same GPU" in text) == (gpu == "NVIDIA H200")
