"""The shipped seeds: real H200 measurements with provenance, loadable, answering for the
seeded tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.discovery import all_tasks
from kernelkb.optimizer.sandbox import source_rules
from kernelkb.service import LocalKnowledge

SEEDS = Path(__file__).resolve().parents[2] / "seeds"


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) on the SQLite file and Chroma folder, a user's
    default store, with the shipped seeds to load."""
    return {"seeds_dir": SEEDS}


def _records() -> list[ExperienceRecord]:
    return [ExperienceRecord.model_validate(json.loads(line))
            for path in sorted(SEEDS.glob("*.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]


def test_every_seed_is_a_gpu_measurement_with_its_provenance() -> None:
    records = _records()
    assert records
    for r in records:
        assert r.env.gpu_name == "NVIDIA H200" and r.env.triton_version and r.env.torch_version
        assert r.provenance.command, r.id
        if r.verdict.value in ("improved", "regressed"):
            assert r.evidence == "measured", r.id  # a speed verdict comes from a GPU clock


def test_every_shipped_timed_verdict_carries_its_interval() -> None:
    """A timed seed carries the interleaved comparison its verdict came from; a round
    measured before comparisons ships as an untimed edit, its figure nowhere. A run's
    baseline is timed against nothing: its figure is the run's start, its verdict none."""
    records = _records()
    timed = [r for r in records if r.feedback.timing_available]
    starts = [r for r in timed if r.provenance.round_kind == "baseline"]
    verdicts = [r for r in timed if r.provenance.round_kind != "baseline"]
    assert verdicts and starts
    assert all(r.verdict.value == "neutral" for r in starts)
    assert [r.id for r in verdicts if r.feedback.comparison is None] == []
    for r in verdicts:
        assert r.verdict.value == r.feedback.comparison.outcome, r.id
    stripped = [r for r in records if "untimed: its GPU time was one figure" in r.feedback.text]
    assert stripped
    for r in stripped:
        assert r.verdict.value == "neutral" and r.feedback.time_ms is None, r.id
        assert r.evidence == "verified" and r.edit.summary, r.id


def test_no_seed_holds_code_the_judge_refuses_from_its_source() -> None:
    """An example the next agent reads must be one the judge would take (a split-K
    reduction in PyTorch, measured before the rule read the source, is not)."""
    tasks = all_tasks()
    refused = [r.id for r in _records() if r.edit.child_source and source_rules.refused(
        r.edit.child_source, tasks.get(r.task.task_id))]
    assert refused == []


def test_a_fresh_store_answers_for_every_seeded_task_on_the_h200(
        knowledge: LocalKnowledge) -> None:
    """Each task the seeds measured is answered for; a task without shipped seeds (a
    user's own) is valid and is not asked about."""
    seeded = {r.task.task_id for r in _records()}
    tasks = [task for task in all_tasks().values() if task.name in seeded]
    assert tasks
    kb = knowledge
    reports = kb.seed_if_empty()
    assert reports and all(not r.rejected for r in reports.values())
    for task in tasks:
        report = kb.insights(op_type=task.op_type, gpu_name="NVIDIA H200")
        assert report.total > 0 and report.categories, task.name
    kb.close()
