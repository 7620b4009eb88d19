"""benchmarks/runs_to_seeds.py: a run's journal joins the seed file once, in order, and
the records already there are kept byte for byte."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.runs_to_seeds import append, journal_records, without_journal

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "benchmarks" / "runs" / "softmax-20261130T195004-f7639e"


def test_a_journal_joins_the_seeds_once(tmp_path: Path) -> None:
    lines = journal_records(RUN)
    seeds = tmp_path / "runs.jsonl"
    seeds.write_text(lines[0] + "\n")
    assert append([RUN], seeds) == len(lines) - 1
    assert seeds.read_text().split("\n")[:-1] == lines
    assert append([RUN, RUN], seeds) == 0  # a second time adds nothing


def test_records_without_a_journal_are_counted(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(RUN, runs / RUN.name)
    seeds = tmp_path / "runs.jsonl"
    orphan = json.loads(journal_records(RUN)[0]) | {"id": "0" * 32, "run_id": "gone-run"}
    seeds.write_text("\n".join([*journal_records(RUN), json.dumps(orphan)]) + "\n")
    assert without_journal(seeds, runs) == {"gone-run": 1}


def test_a_folder_without_a_journal_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no journal"):
        journal_records(tmp_path)
