"""A user's task outside the package, as the README's "Adding a task" has one write it:
a fused residual add + RMSNorm related to rmsnorm (the files in tests/kernels/user_task/).
``write_task`` puts it in a folder, as one file (the template inline) or as the file plus
``templates/<name>.py``; ``isolated_registry`` lets a test register tasks and leaves the
registry as it found it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent / "user_task"
TASK_FILE = (SAMPLE / "add_rmsnorm.py").read_text()
TEMPLATE = (SAMPLE / "templates" / "add_rmsnorm.py").read_text()


def write_task(folder: Path, name: str = "add_rmsnorm", one_file: bool = False,
               replace: dict[str, str] | None = None) -> Path:
    """Write the sample task as ``folder/<name>.py``; ``replace``: text edits to it."""
    folder.mkdir(parents=True, exist_ok=True)
    text = TASK_FILE.replace('name="add_rmsnorm"', f'name="{name}"')
    if one_file:
        inline = f"TEMPLATE = '''\\\n{TEMPLATE}'''\n\n\ndef reference"
        text = text.replace("def reference", inline, 1)
        text = text.replace("template=read_template(__file__)", "template=TEMPLATE")
    else:
        (folder / "templates").mkdir(exist_ok=True)
        (folder / "templates" / f"{name}.py").write_text(TEMPLATE)
    for old, new in (replace or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    path = folder / f"{name}.py"
    path.write_text(text)
    return path


@contextmanager
def isolated_registry() -> Iterator[None]:
    """Snapshot the task registry and discovery state; restore them afterwards."""
    from kernelkb.kernels import discovery

    saved = (dict(discovery.TASKS), dict(discovery._ORIGINS), set(discovery._LOADED),
             list(discovery._FOLDERS), discovery._scanned_path, set(sys.modules))
    try:
        yield
    finally:
        discovery.TASKS.clear()
        discovery.TASKS.update(saved[0])
        discovery._ORIGINS.clear()
        discovery._ORIGINS.update(saved[1])
        discovery._LOADED.clear()
        discovery._LOADED.update(saved[2])
        discovery._FOLDERS[:] = saved[3]
        discovery._scanned_path = saved[4]
        for name in set(sys.modules) - saved[5]:
            if name.startswith(("kernelkb_task_", "kkb_demo")):
                del sys.modules[name]
