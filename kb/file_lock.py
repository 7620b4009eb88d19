"""An exclusive lock on a file, shared by every process that opens it."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def file_lock(path: Path | str) -> Iterator[None]:
    """Hold an flock on ``path`` (created if missing). The kernel drops it when the
    holder dies, so a killed writer never leaves the store locked."""
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
