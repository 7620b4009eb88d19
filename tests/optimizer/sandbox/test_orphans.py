"""The folders a runner killed outright leaves are removed by the next runner
(optimizer/sandbox/orphans.py): those its folder names, once its pid no longer runs; not
a live runner's, not a folder another name or place, not a link's target."""

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


def _runner(where: Path, name: str, pid: int, made: list[Path]) -> Path:
    folder = where / f"kernelkb_runner_{name}"
    folder.mkdir()
    (folder / "result.json").write_text("")
    (folder / orphans.OWNER).write_text("\n".join([str(pid), *map(str, made)]) + "\n")
    return folder


def test_a_gone_runners_folders_are_swept_and_no_others(tmp_path: Path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    victim = outside / "kernelkb_task_keep"  # named like ours, not where ours are
    victim.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    (target / "precious").write_text("x")
    link = tmp_path / "kernelkb_sandbox_link"
    link.symlink_to(target)
    made = [tmp_path / "kernelkb_sandbox_a1", tmp_path / "kernelkb_task_a1"]
    for path in made:
        path.mkdir()
        (path / "x").write_text("")
    gone = _runner(tmp_path, "a1", _dead_pid(), [*made, victim, link, tmp_path / "target"])
    live_made = tmp_path / "kernelkb_sandbox_b2"
    live_made.mkdir()
    live = _runner(tmp_path, "b2", os.getpid(), [live_made])
    no_owner = tmp_path / "kernelkb_runner_c3"
    no_owner.mkdir()

    removed = orphans.sweep(str(tmp_path))
    assert sorted(removed) == sorted(str(p) for p in [*made, gone])
    assert not any(p.exists() for p in [*made, gone])
    assert victim.exists() and link.is_symlink() and (target / "precious").exists()
    assert live.exists() and live_made.exists() and no_owner.exists()


def test_folder_names_carry_no_pid_and_are_removed_on_close():
    with orphans.folder("sandbox") as path:
        assert Path(path).name.startswith("kernelkb_sandbox_")
        # the prefix and tempfile's eight random characters: no pid between them
        assert len(Path(path).name) == len("kernelkb_sandbox_") + 8
    assert not Path(path).exists()
    with pytest.raises(ValueError, match="one of"):
        orphans.folder("cache")
