"""Importing a candidate's source as a module, in a folder the process owns."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any


def load_candidate(source: str, module_name: str = "candidate") -> Any:
    """Import a candidate's source as a module. Triton's @jit needs a real file, kept
    while the process lives (see ``_candidate_folder``)."""
    import importlib.util

    # a folder per load keeps the file's name (error messages point into "candidate.py")
    path = _candidate_folder() / str(next(_CANDIDATE_SERIAL)) / f"{module_name}.py"
    path.parent.mkdir()
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "run", None)):
        raise AttributeError("candidate defines no run(...) function")
    return module


_CANDIDATE_SERIAL = itertools.count()
_candidate_home: Path | None = None


def _candidate_folder() -> Path:
    """One folder per process under the temp dir, removed at exit; folders of processes
    that died without exiting (a sandbox worker killed for a hang) are removed by the
    next process that loads a candidate. Why: a folder per candidate was never removed,
    and a day of tests and optimize runs left tens of thousands behind."""
    global _candidate_home
    if _candidate_home is None or _candidate_home.name != str(os.getpid()):  # or forked
        import atexit
        import shutil
        import tempfile

        root = Path(tempfile.gettempdir()) / "kernelkb-candidates"
        root.mkdir(exist_ok=True)
        for folder in root.iterdir():
            if folder.name.isdigit() and not _alive(int(folder.name)):
                shutil.rmtree(folder, ignore_errors=True)
        _candidate_home = root / str(os.getpid())
        _candidate_home.mkdir(exist_ok=True)
        atexit.register(shutil.rmtree, _candidate_home, True)
    return _candidate_home


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
