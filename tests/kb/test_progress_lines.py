"""No silent minutes and no false alarms: ``kernelkb seed`` says what it loads before the
store and the model open, then prints each file's line as that file is stored (not all at
the end); a read command on a full store never says "first use: loading the shipped
seeds", on a terminal or not, and on an empty one it says so and names each file.

Real ``kernelkb`` processes (the seeding one embeds with the real model), real stores;
``TTY_COMPATIBLE`` and ``KERNELKB_PROGRESS`` make the child draw its spinners as on a
terminal, so a flashed line is caught."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernelkb.service import LocalKnowledge

SEEDS = Path(__file__).resolve().parents[2] / "seeds"
SMALL, LARGE = "revalidate_h200.jsonl", "runs_h200.jsonl"  # a few records, and many


def _count(name: str) -> int:
    return sum(1 for line in (SEEDS / name).read_text().splitlines() if line.strip())


@pytest.fixture
def seeds(tmp_path: Path) -> Path:
    folder = tmp_path / "seeds"
    folder.mkdir()
    for name in (SMALL, LARGE):
        shutil.copy(SEEDS / name, folder / name)
    return folder


def _env(tmp_path: Path, seeds: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELKB_")}
    return {**env, "KERNELKB_HOME": str(tmp_path / "home"), "KERNELKB_SEEDS_DIR": str(seeds),
            **extra}


@pytest.mark.slow  # > 20 s on two cores
def test_seed_says_what_it_loads_first_and_prints_each_file_as_it_is_stored(
        tmp_path: Path, seeds: Path) -> None:
    child = subprocess.Popen([sys.executable, "-m", "kernelkb", "seed"],
                             env=_env(tmp_path, seeds), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    assert child.stdout is not None
    first = child.stdout.readline()
    assert first.startswith(f"loading 2 seed files ({_count(SMALL) + _count(LARGE)} records) "
                            "from ")
    small = child.stdout.readline()
    running = child.poll() is None  # the large file is still being embedded
    rest = child.stdout.read()
    assert child.wait(timeout=300) == 0
    assert small == f"{SMALL}: {_count(SMALL)} accepted, 0 duplicate, 0 rejected\n"
    assert running, "the first file's line came only when everything was done"
    assert rest == f"{LARGE}: {_count(LARGE)} accepted, 0 duplicate, 0 rejected\n"


def test_read_commands_say_first_use_only_when_they_load(tmp_path: Path, seeds: Path) -> None:
    command = [sys.executable, "-m", "kernelkb", "insights", "--op", "softmax", "--gpu",
               "h200"]
    terminal = {"KERNELKB_PROGRESS": "1", "TTY_COMPATIBLE": "1", "KERNELKB_VECTORS": "false"}
    empty = subprocess.run(command, env=_env(tmp_path, seeds, **terminal), capture_output=True,
                           text=True, timeout=300)
    assert empty.returncode == 0, empty.stderr
    assert "first use: loading seeds from " in empty.stderr
    assert " into the store at " in empty.stderr
    assert f"  stored {SMALL}: {_count(SMALL)} experiences" in empty.stderr
    assert f"loaded {_count(SMALL) + _count(LARGE)} shipped experiences first" in empty.stderr

    full = subprocess.run(command, env=_env(tmp_path, seeds, **terminal), capture_output=True,
                          text=True, timeout=300)
    assert full.returncode == 0, full.stderr
    assert "first use" not in full.stderr and "loading the shipped seeds" not in full.stderr
    assert full.stdout == empty.stdout


@pytest.fixture
def backend(seeds: Path) -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) on the SQLite file, without vectors, its seeds
    the two files copied to ``seeds``."""
    return {"vectors": False, "seeds_dir": seeds}


def test_a_store_that_holds_the_seeds_has_none_to_load(knowledge: LocalKnowledge) -> None:
    kb = knowledge
    assert kb.seeds_to_load() == [SMALL, LARGE]  # an empty store: every file
    assert set(kb.seed_if_empty()) == {SMALL, LARGE}
    assert kb.seeds_to_load() == [] and kb.seed_if_empty() == {}
    kb.close()
