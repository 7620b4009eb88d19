"""A file replaced whole or not at all: written beside its target, renamed over it.

Why: a reader (another process, the next command) sees the old file or the new one, never
a torn one; a writer that fails or is interrupted leaves the old file as it was. One
helper for every such write (exports, caches, the run file); kb/atomic_file.py adds
fsync and the error messages an export needs.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replaced(path: Path) -> Iterator[Path]:
    """A new empty temporary file beside ``path`` for the block to write (by name: any
    writer, ``np.savez``, ``torch.onnx.export``), renamed over ``path`` when the block
    ends; on any error (KeyboardInterrupt included) it is removed and ``path`` is as it
    was. The file gets ``path``'s permissions where it exists, else the umask's default
    (a name unique to the process, thread and call, so two writers never share one)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    try:
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
