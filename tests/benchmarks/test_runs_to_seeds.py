"""benchmarks/runs_to_seeds.py: a run's journal joins the seed file once, in order, as
the seeds ship it: a round whose verdict was a single figure (no comparison) untimed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.runs_to_seeds import append, journal_records, shipped, without_journal
from kernelkb.kb.record import ExperienceRecord

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "benchmarks" / "runs" / "softmax-20261130T195004-f7639e"


def test_a_journal_joins_the_seeds_once(tmp_path: Path) -> None:
    lines = [shipped(line) for line in journal_records(RUN)]
    seeds = tmp_path / "runs.jsonl"
    seeds.write_text(lines[0] + "\n")
    assert append([RUN], seeds) == len(lines) - 1
    assert seeds.read_text().split("\n")[:-1] == lines
    assert append([RUN, RUN], seeds) == 0  # a second time adds nothing
    records = [ExperienceRecord.model_validate_json(line) for line in lines]
    assert not any(r.single_figure for r in records)
    untimed = [r for r in records if "untimed: its GPU time was one figure" in r.feedback.text]
    assert untimed and all(r.verdict.value == "neutral" for r in untimed)
    assert all(r.feedback.timing_available for r in records
               if r.provenance.round_kind == "baseline")  # the start keeps its figure


def test_records_without_a_journal_are_counted(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(RUN, runs / RUN.name)
    seeds = tmp_path / "runs.jsonl"
    orphan = json.loads(journal_records(RUN)[0]) | {"id": "0" * 32, "run_id": "gone-run"}
    kept = [shipped(line) for line in journal_records(RUN)]
    seeds.write_text("\n".join([*kept, json.dumps(orphan)]) + "\n")
    assert without_journal(seeds, runs) == {"gone-run": 1}


def test_a_folder_without_a_journal_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no journal"):
        journal_records(tmp_path)
