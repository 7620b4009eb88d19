"""kernels/shared is the floor: the standard library only.

The sandbox's worker imports it on a bare GPU host (torch and triton, nothing else), and
retrieval and the store import it where torch must not be loaded; so every module of it
imports in a Python with no site-packages at all, and loads nothing beyond the standard
library and its own package.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / "kernels" / "shared"

CHECK = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
outside = sorted(m for m in sys.modules
                 if m.split(".")[0] not in sys.stdlib_module_names | {"kernelkb", "__main__"})
assert not outside, outside
print(len(sys.argv) - 1, "modules")
"""


def test_every_shared_module_imports_with_the_standard_library_alone() -> None:
    modules = ["kernelkb.kernels.shared"] + sorted(
        f"kernelkb.kernels.shared.{p.stem}" for p in SHARED.glob("*.py") if p.stem != "__init__")
    assert {"kernelkb.kernels.shared.gpus", "kernelkb.kernels.shared.vocabulary"} <= set(modules)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # -S: no site-packages on the path, so importing torch, numpy, pydantic... fails outright
    done = subprocess.run([sys.executable, "-S", "-c", CHECK, *modules], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{len(modules)} modules"
