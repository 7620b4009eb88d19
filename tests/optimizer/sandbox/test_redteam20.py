"""Red team 20 (tests/bad_kernels/REDTEAM20.md): held-out plants from the docs alone, after
round 19's rules. Four cheats passed the CPU judge, each short only where no list and no
fixed reach shape went, and one probe ran its code in the judge:

- attention windowed to the last 16K keys only with two or more new tokens, softmax
  taking a row's max from its first 2**17 columns only past eight long rows, matmul
  dropping K's tail past 32K: the reach is now drawn per evaluation from spans of every
  dimension (kernels/reach.py), K's past the lists among them;
- attention scaled by 1/sqrt(min(head_dim, 128)): head_dim 256 (Gemma) is one of the
  interpreter's reach head sizes (on a GPU the space's tiles are sized for 128);
- shadow modules written into the jail's home, the first entry of the judge's import
  path, imported by the judge after the worker ran: the sandbox's processes drop their
  start folder from ``sys.path`` first (optimizer/sandbox/import_path.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernelkb.kernels.discovery import get_task

BAD = Path(__file__).parents[2] / "bad_kernels"


def test_a_module_in_the_start_folder_is_not_imported(tmp_path: Path) -> None:
    """`python -c` (as `-m`) puts the start folder first; after drop_start_folder, modules
    written there later (as the candidate wrote them) under a new name and under a
    standard one not imported yet are not what an import finds."""
    code = ("import os, sys\nsys.path.insert(1, os.getcwd())\n"
            "from kernelkb.optimizer.sandbox.import_path import drop_start_folder\n"
            "print(drop_start_folder())\nassert 'plistlib' not in sys.modules\n"
            "for name in ('shadowed_rt20', 'plistlib'):\n"
            "    with open(name + '.py', 'w') as f:\n"
            "        f.write(f'open({name!r} + \".imported\", \"w\").close()\\n')\n"
            "import plistlib\n"
            "try:\n    import shadowed_rt20\nexcept ModuleNotFoundError:\n    print('not found')\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "not found" in done.stdout and "''" in done.stdout, done.stdout
    assert (tmp_path / "plistlib.py").exists()  # the shadows were written
    assert not list(tmp_path.glob("*.imported"))


def test_head_dim_256_is_one_of_the_interpreters_reach_head_sizes():
    reach = get_task("attention").cpu_reach
    assert reach is not None and 256 in reach.spans[4]


def _evaluated(task: str, plant: str, **kwargs):
    from kernelkb.optimizer.sandbox import evaluate

    return evaluate(task, (BAD / f"redteam20_{plant}.py").read_text(), shapes="auto",
                    seeds=1, timeout_s=900, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize(("task", "plant", "reach"), [
    ("attention", "attention_prefill_window", (1, 1, 2, 40000, 64)),
    ("softmax", "softmax_vocab_batch_first_chunk_max", (12, 600001)),
    ("matmul", "matmul_long_k_tail", (16, 64, 40000)),
], ids=["prefill-window", "nine-rows-first-chunk", "k-tail"])
def test_a_short_path_in_a_region_of_the_reach_is_refused(task, plant, reach):
    """Each shape named is one the drawn reach meets (tests/kernels/test_reach.py)."""
    result = _evaluated(task, plant, reach=reach)
    assert not result.ok and result.error_kind == "wrong_result", result.text
    assert "past the task's lists" in (result.error_message or ""), result.error_message


@pytest.mark.slow
def test_a_scale_written_for_head_dim_128_at_most_is_refused():
    result = _evaluated("attention", "attention_head256_scale", reach=(1, 1, 2, 32769, 256))
    assert not result.ok and result.error_kind == "wrong_result", result.text
    assert "head_dim=256" in (result.error_message or ""), result.error_message


@pytest.mark.slow
def test_modules_planted_for_the_judge_to_import_change_nothing():
    """The probe's kernel is round 19's softmax cheat, which the reach refuses; with its
    shadow modules imported by the judge the verdict came back ok."""
    # a reach shape the cheat is wrong on, its first row a masked prefix (the condition
    # of the values the reach's rows start from: 7 rows hold 7 of softmax's 8 kinds)
    result = _evaluated("softmax", "escape_judge_import_path", refuse_imports=False,
                        reach=(7, 540000), reach_rows_from=4)
    assert not result.ok and result.error_kind == "wrong_result", result.text
