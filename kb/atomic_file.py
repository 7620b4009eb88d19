"""Write a file whole or not at all.

Why: opening the target for writing empties it first, so a full disk, a size limit or a
Ctrl-C half-way left an export torn and the previous one gone. Writing beside it and
renaming over it on success keeps the old file until the new one is complete.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from kernelkb.kernels.shared.atomic import replaced


def write_atomically(path: Path, write: Callable[[TextIO], None]) -> None:
    """Call ``write`` on a temporary file in ``path``'s folder, synced to disk, then
    rename it to ``path`` (kernels/shared/atomic.py); on any error (KeyboardInterrupt
    included) the temporary file goes and ``path`` is as it was. OSError (a missing
    folder, a full disk) is raised with the path named."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(21, "Is a directory", str(path))
    if path.exists() and not path.is_file():  # a pipe or a device: a stream, written as one
        with path.open("w", encoding="utf-8") as out:
            write(out)
        return
    if not path.parent.is_dir():
        raise FileNotFoundError(2, "No such folder", str(path.parent))
    with replaced(path) as tmp, tmp.open("w", encoding="utf-8") as out:
        write(out)
        out.flush()
        os.fsync(out.fileno())
