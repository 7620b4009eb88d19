"""optimizer/sandbox/regressions.py: the kept failing draws live in the store's home and
are replaced whole, by several evaluations at once (a sweep checks in threads)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from kernelkb.kernels.shared.folders import user_data
from kernelkb.optimizer.sandbox import regressions


def _judge(seed: int) -> dict:
    return {"property": {"shrunk": {"shape": [2, 16], "condition": "{}", "seed": seed}}}


def test_without_a_home_the_cases_sit_in_the_users_data_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KERNELKB_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert regressions.folder() == user_data() / "regressions"
    assert regressions.folder() == tmp_path / "data" / "kernelkb" / "regressions"


def test_threads_keeping_cases_at_once_each_keep_theirs_and_leave_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One process, eight threads: a temporary file named by the process alone was
    shared, and a thread's rename found it gone (its case was lost, keep said None)."""
    monkeypatch.setenv("KERNELKB_HOME", str(tmp_path))
    start = threading.Barrier(8)
    kept: dict[int, object] = {}

    def keep(seed: int) -> None:
        start.wait()
        for round_ in range(20):
            kept[seed * 100 + round_] = regressions.keep("softmax", _judge(seed * 100 + round_))

    threads = [threading.Thread(target=keep, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(case is not None for case in kept.values()), \
        [seed for seed, case in kept.items() if case is None]
    files = sorted(p.name for p in (tmp_path / "regressions").iterdir())
    assert files == ["softmax.json"]
    cases = json.loads((tmp_path / "regressions" / "softmax.json").read_text())
    assert 1 <= len(cases) <= regressions.KEEP
    assert regressions.load("softmax") == cases
