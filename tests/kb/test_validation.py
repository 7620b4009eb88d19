"""Validation at the edge (kb/limits.py): every bound is a field-named error, and a bad
record in a batch never costs the good ones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kb_testdata import record_dict
from pydantic import ValidationError

from kb import limits
from kb.ingest import validate_batch
from kb.record import parse_record

REPO = Path(__file__).resolve().parents[2]


def _set(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    node = data
    *head, last = path.split(".")
    for part in head:
        node = node[part]
    node[last] = value
    return data


BAD: list[tuple[str, Any, str]] = [
    ("feedback.time_ms", float("nan"), "finite"),
    ("feedback.speedup_vs_parent", float("inf"), "finite"),
    ("feedback.bias", float("-inf"), "finite"),
    ("env.mem_bandwidth_gbps", float("nan"), "finite"),
    ("edit.config", {"BLOCK": float("nan")}, "finite"),
    ("edit.config", {"BLOCK": 10**30}, "64 bits"),
    ("iteration", 10**30, "less than or equal"),
    ("feedback.registers", 2**63, "less than or equal"),
    ("task.op_type", "x" * (limits.SHORT + 1), "at most"),
    ("edit.summary", "x" * (limits.SUMMARY + 1), "at most"),
    ("edit.diff", "x" * (limits.DIFF + 1), "at most"),
    ("edit.summary", "nul\x00inside", "NUL"),
    ("edit.summary", "lone \ud800 surrogate", "Unicode"),
    ("edit.config", {f"K{n}": n for n in range(limits.CONFIG_KEYS + 1)}, "at most"),
    ("verdict", "great", "Input should be"),
]


@pytest.mark.parametrize(("path", "value", "needle"), BAD)
def test_bad_value_is_a_field_error(path: str, value: Any, needle: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_record(_set(record_dict(), path, value))
    errors = info.value.errors()
    assert any(".".join(map(str, e["loc"])).startswith(path) for e in errors), errors
    assert any(needle.lower() in e["msg"].lower() for e in errors), errors


def test_batch_keeps_the_good_records() -> None:
    items = [record_dict(summary="good a"), _set(record_dict(summary="bad"), "iteration", 10**30),
             record_dict(summary="good b"), "[1, 2", ["not", "a", "record"]]
    good, bad = validate_batch(items)
    assert [r.edit.summary for r in good] == ["good a", "good b"]
    assert {r.index for r in bad} == {1, 3, 4}
    assert next(r.field for r in bad if r.index == 1) == "iteration"


def test_shipped_record_ids_unchanged() -> None:
    """The new bounds change no id: every shipped seed still validates to its stored id."""
    seen = 0
    for path in sorted((REPO / "seeds").glob("*.jsonl")):
        for line in path.read_text().splitlines()[:50]:
            data = json.loads(line)
            assert parse_record(data).id == data["id"]
            seen += 1
    assert seen > 100


def test_cli_ingest_names_file_and_line(tmp_path: Path) -> None:
    bad = _set(record_dict(summary="bad"), "feedback.time_ms", "NaN")
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(record_dict(summary="ok")) + "\n\n" +
                    json.dumps(bad).replace('"NaN"', "NaN") + "\n")
    env = {"KERNELKB_DATA_DIR": str(tmp_path / "store"), "KERNELKB_VECTORS": "false",
           "KERNELKB_LOAD_SEEDS_ON_START": "false", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "kb.cli", "ingest", str(path)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "1 accepted" in proc.stdout
    assert f"{path}:3: feedback.time_ms: Input should be a finite number" in proc.stdout
