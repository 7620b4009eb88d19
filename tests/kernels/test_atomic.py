"""kernels/shared/atomic.py: the one helper every whole-file write goes through."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from kernelkb.kernels.shared.atomic import replaced
from kernelkb.optimizer.run_file import RunFile


def test_a_write_replaces_the_file_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    target.chmod(0o640)
    with replaced(target) as tmp:
        assert tmp.parent == tmp_path and tmp.exists() and target.read_text() == "old"
        tmp.write_text("new")
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # the old file's permissions
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    with pytest.raises(KeyboardInterrupt), replaced(target) as tmp:
        tmp.write_text("half")
        raise KeyboardInterrupt
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_a_new_file_gets_the_umask_default(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    try:
        with replaced(tmp_path / "new") as tmp:
            tmp.write_text("x")
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o644


def test_the_run_file_is_written_through_it(tmp_path: Path) -> None:
    run = RunFile(tmp_path / "run", "r1", "softmax")
    run.start()
    assert [p.name for p in (tmp_path / "run").iterdir()] == [run.path.name]
    assert '"run_id": "r1"' in run.path.read_text()


def test_the_workers_result_file_is_written_through_it(tmp_path: Path) -> None:
    """An in-process worker's result (the runner reads a descriptor instead): each
    progress write replaces the file whole, with the permissions it had."""
    from kernelkb.optimizer.sandbox.worker import write_result

    target = tmp_path / "result.json"
    write_result({"stage": "load"}, fd=None, path=str(target))
    target.chmod(0o600)
    write_result({"stage": "done", "final": True}, fd=None, path=str(target))
    assert json.loads(target.read_text()) == {"stage": "done", "final": True}
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]
