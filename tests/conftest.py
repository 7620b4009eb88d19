"""Session-wide setup, imported before any test module is collected.

Without CUDA, Triton kernels run in the CPU interpreter (TRITON_INTERPRET=1), which
checks correctness only, never speed. The variable must be set before triton is first
imported anywhere in the process: triton.language builds its own @jit helpers (tl.max,
tl.sum, ...) at import, in interpreter form only if the variable is already set. A test
module collected early that imports triton (through kernels or the sandbox) would
otherwise leave those helpers compiled-mode and every interpreted kernel would fail with
"Cannot call @triton.jit'd outside of the scope of a kernel".

The store's home is the user's data folder by default (kb/settings.py); every test runs
with KERNELKB_HOME (and XDG_DATA_HOME, for a subprocess that drops KERNELKB_*) in a fresh
temporary folder, and on a machine without a user store (CI) the session fails if one appeared.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import torch

from kb.settings import default_home

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


REAL_HOME = default_home()
_REAL_EXISTED = REAL_HOME.exists()  # on CI's clean machine: False, and so it must stay
TEST_ROOT = Path(tempfile.mkdtemp(prefix="kernelkb-tests-"))
os.environ["KERNELKB_HOME"] = str(TEST_ROOT / "home")
os.environ["XDG_DATA_HOME"] = str(TEST_ROOT / "xdg-data")
os.environ.pop("KERNELKB_DATA_DIR", None)


def pytest_sessionfinish(session, exitstatus) -> None:  # type: ignore[no-untyped-def]
    changed = not _REAL_EXISTED and REAL_HOME.exists()
    shutil.rmtree(TEST_ROOT, ignore_errors=True)
    if changed:
        print(f"\nthe tests wrote to the real user store {REAL_HOME}: a test or subprocess "
              "ignored KERNELKB_HOME")
        session.exitstatus = 1
