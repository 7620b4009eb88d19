"""The folders a runner killed outright leaves are removed by the next runner
(optimizer/sandbox/orphans.py): those of a pid that no longer runs, not a live one's, not
another name's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelkb.optimizer.sandbox import orphans


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_the_folders_of_a_runner_that_is_gone_are_swept_and_no_others(tmp_path: Path):
    dead = _dead_pid()
    left = [tmp_path / f"kernelkb_{kind}_{dead}_x1" for kind in orphans.KINDS]
    live = tmp_path / f"kernelkb_runner_{os.getpid()}_x2"
    other = [tmp_path / f"kernelkb_runner_x3_{dead}", tmp_path / f"kernelkb_jail_{dead}_x4"]
    for path in [*left, live, *other]:
        path.mkdir()
        (path / "result.json").write_text("")
    assert sorted(orphans.sweep(str(tmp_path))) == sorted(str(p) for p in left)
    assert not any(p.exists() for p in left)
    assert live.exists() and all(p.exists() for p in other)


def test_a_private_folder_carries_its_process_and_is_removed_on_close():
    with orphans.folder("runner") as path:
        assert Path(path).name.startswith(f"kernelkb_runner_{os.getpid()}_")
        assert orphans.sweep(str(Path(path).parent)).count(path) == 0  # this one runs
    assert not Path(path).exists()
    with pytest.raises(ValueError, match="one of"):
        orphans.folder("cache")
