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

from kernelkb.kb import limits
from kernelkb.kb.ingest import validate_batch
from kernelkb.kb.record import parse_record
from kernelkb.service import LocalKnowledge

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
    # the probe's second round: true as a number, dates and facts no device has
    ("iteration", True, "true/false"),
    ("feedback.registers", False, "true/false"),
    ("feedback.time_ms", True, "true/false"),
    ("created_at", "0001-01-01T00:00:00+05:00", "year"),
    ("created_at", "9999-12-31T23:59:59-05:00", "year"),
    ("env.peak_tflops", 1e300, "less than or equal"),
    ("env.mem_bandwidth_gbps", 5e-324, "greater than or equal"),
    ("feedback.time_ms", 5e-324, "greater than or equal"),
    ("feedback.speedup_vs_parent", 1e300, "less than or equal"),
]


@pytest.mark.parametrize(("path", "value", "needle"), BAD)
def test_bad_value_is_a_field_error(path: str, value: Any, needle: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_record(_set(record_dict(), path, value))
    errors = info.value.errors()
    assert any(".".join(map(str, e["loc"])).startswith(path) for e in errors), errors
    assert any(needle.lower() in e["msg"].lower() for e in errors), errors


def test_a_time_without_a_zone_is_taken_as_utc() -> None:
    record = parse_record(_set(record_dict(), "created_at", "2024-01-01T00:00:00"))
    assert record.created_at.isoformat() == "2024-01-01T00:00:00+00:00"


def test_batch_keeps_the_good_records() -> None:
    items = [record_dict(summary="good a"), _set(record_dict(summary="bad"), "iteration", 10**30),
             record_dict(summary="good b"), "[1, 2", ["not", "a", "record"]]
    good, bad = validate_batch(items)
    assert [r.edit.summary for r in good] == ["good a", "good b"]
    assert {r.index for r in bad} == {1, 3, 4}
    assert next(r.field for r in bad if r.index == 1) == "iteration"


def test_json_nested_too_deeply_is_one_rejection() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    good, bad = validate_batch([deep, json.dumps(record_dict(summary="kept")),
                                b'{"caf\xe9": 1}'])
    assert [r.edit.summary for r in good] == ["kept"]
    assert [(r.index, r.reason.split(":")[0]) for r in bad] == [
        (0, "invalid JSON"), (2, "not UTF-8 text")]


def test_a_record_the_database_refuses_is_rejected_alone(
        knowledge: LocalKnowledge, monkeypatch: pytest.MonkeyPatch) -> None:
    """A value the schema let through but the database refuses (here, one the test makes
    unstorable) costs its own record, named by position, not the batch."""
    from kernelkb.kb import ingest as ingest_mod

    kb = knowledge
    items = [record_dict(summary=f"record {n}", run=f"refused-{n}") for n in range(3)]
    victim = parse_record(items[1]).id
    values = ingest_mod.experience_values

    def unstorable(record, regime_of):  # type: ignore[no-untyped-def]
        row = values(record, regime_of)
        return {**row, "dtype": {"not": "storable"}} if record.id == victim else row

    monkeypatch.setattr(ingest_mod, "experience_values", unstorable)
    report = kb.ingest(items)
    assert len(report.accepted) == 2 and victim not in report.accepted
    assert [(r.index, r.reason.split(":")[0]) for r in report.rejected] == [
        (1, "the database refused it")]
    stats = kb.stats()
    assert stats["experiences"] == stats["vectors"] == 2


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
    proc = subprocess.run([sys.executable, "-m", "kernelkb", "ingest", str(path)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "1 accepted" in proc.stdout
    assert f"{path}:3: feedback.time_ms: Input should be a finite number" in proc.stdout


def test_cli_ingest_reads_any_json_lines_file(tmp_path: Path) -> None:
    """A byte-order mark, raw U+2028 / U+0085 inside a string (``export`` writes them
    so), CRLF endings: all records. A line that is not UTF-8 or nested too deeply is one
    rejection naming its line; the lines around it are stored."""
    separators = record_dict(summary="line\u2028two \x85 three", run="files-1")
    lines = [json.dumps(record_dict(summary="after the BOM", run="files-0")).encode(),
             json.dumps(separators, ensure_ascii=False).encode(),
             b'{"summary": "caf\xe9"}',
             b"[" * 50_000 + b"]" * 50_000,
             json.dumps(record_dict(summary="last", run="files-2")).encode()]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\r\n")
    env = {"KERNELKB_DATA_DIR": str(tmp_path / "store"), "KERNELKB_VECTORS": "false",
           "KERNELKB_LOAD_SEEDS_ON_START": "false", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "kernelkb", "ingest", str(path)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "3 accepted" in proc.stdout, proc.stdout
    assert f"{path}:3: <record>: not UTF-8 text" in proc.stdout
    assert f"{path}:4: <record>: invalid JSON: nested too deeply" in proc.stdout
    exported = tmp_path / "out.jsonl"
    proc = subprocess.run([sys.executable, "-m", "kernelkb", "export", "-o", str(exported)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    env["KERNELKB_DATA_DIR"] = str(tmp_path / "second")
    proc = subprocess.run([sys.executable, "-m", "kernelkb", "ingest", str(exported)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "3 accepted" in proc.stdout, proc.stdout + proc.stderr
