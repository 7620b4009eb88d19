"""The kernelkb CLI against a real store in tmp_path (in-process, env-configured)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kb_testdata import record_dict

from kernelkb.cli import main as cli


def test_cli_ingest_query_export_stats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("KERNELKB_SEEDS_DIR", str(tmp_path / "none"))
    bad = record_dict(summary="bad")
    bad["env"]["sm_count"] = 0
    lines = [json.dumps(record_dict()), json.dumps(bad),
             json.dumps(record_dict(summary="cli second", config={"B": 2}))]
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("\n".join(lines) + "\n")

    assert cli.main(["ingest", str(jsonl)]) == 1  # one line was rejected
    out = capsys.readouterr().out
    assert "2 accepted, 0 duplicate, 1 rejected" in out and f"{jsonl}:2: env.sm_count:" in out
    assert cli.main(["ingest", str(jsonl)]) == 1
    assert "0 accepted, 2 duplicate" in capsys.readouterr().out

    assert cli.main(["query", "--op", "softmax", "--gpu", "NVIDIA H200", "--arch", "sm_90"]) == 0
    assert "Past experiences that worked" in capsys.readouterr().out

    exported = tmp_path / "out.jsonl"
    assert cli.main(["export", "-o", str(exported)]) == 0
    assert len(exported.read_text().splitlines()) == 2
    assert cli.main(["stats"]) == 0
    assert json.loads(capsys.readouterr().out)["experiences"] == 2
    assert cli.main(["ingest", str(tmp_path / "missing.jsonl")]) == 2


def test_a_question_to_an_empty_store_loads_the_seeds_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fresh install answers from its first command: query and insights on an empty
    store seed it from seeds/ (as serve does) instead of answering with nothing."""
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("KERNELKB_VECTORS", "false")
    assert cli.main(["insights", "--op", "softmax", "--gpu", "NVIDIA H200"]) == 0
    out = capsys.readouterr().out
    assert int(out.split()[0]) > 0  # "<n> experiences"
    assert cli.main(["stats"]) == 0
    assert json.loads(capsys.readouterr().out)["experiences"] > 100


def test_version_names_the_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"kernelkb {version('kernelkb')}"
