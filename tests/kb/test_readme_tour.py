"""The README's tour step 5 runs as printed: the command in its console block, run on the
CPU with a fresh home, prints the block's lines (paths elided there with "...") in the
time the README states. Slow: a real run, under a minute on 2 idle cores."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _step5() -> tuple[list[str], list[str], float]:
    """(the command's words, its printed lines, the seconds the README states)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    step = readme[readme.index("**5. Optimize a kernel.**"):readme.index("**Measure a whole")]
    block = step[step.index("```console\n") + 11:]
    block = block[:block.index("```")].splitlines()
    stated = float(re.search(r"two rounds: (\d+) s on an idle 2-core CPU", step).group(1))
    return block[0].removeprefix("$ ").split(), block[1:], stated


def test_the_tour_step_is_one_regime_for_a_few_rounds() -> None:
    words, lines, stated = _step5()
    assert words[:3] == ["kernelkb", "optimize", "softmax"] and "--max-iters" in words
    rounds = int(words[words.index("--max-iters") + 1])
    assert any(f"after {rounds} rounds" in line for line in lines)
    assert sum(line.startswith("round ") for line in lines) == rounds + 1  # and the baseline
    assert stated < 300  # the tour is five minutes


@pytest.mark.slow
def test_the_tour_step_prints_what_the_readme_shows(tmp_path: Path) -> None:
    words, lines, stated = _step5()
    env = {**os.environ, "KERNELKB_HOME": str(tmp_path / "home")}
    env.pop("KERNELKB_RUNS_DIR", None)
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kernelkb", *words[1:]], env=env,
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr[-3000:]
    printed = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    for line in lines:
        head = line.split("...")[0].split(" .../")[0]
        assert any(p.startswith(head) for p in printed), (line, printed)
    # the README states the idle figure; other work on the cores stretches it (158 s
    # for 45 s at a load of 6 on 2 cores: 3.5x at 3 a core)
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    assert took < stated * max(2.5, 1.5 * load), \
        f"{took:.0f} s at a load of {load:.1f} a core, the README says {stated:.0f} s idle"
