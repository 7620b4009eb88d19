"""The runner's private folders, named by the process that made them, and the sweep of
those whose process is gone.

Why: a runner killed outright (SIGKILL, the OOM killer, a test's timeout) runs none of
its cleanup, and each evaluation it held left its folders in the temporary directory (red
team 21 counted 29 on one host). Each folder carries its runner's pid; a runner removes,
once per process, those of pids that no longer run. It assumes the temporary directory
is not shared with another PID namespace (a container that mounts the host's /tmp),
where a live runner's pid is not seen.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile

KINDS = ("sandbox", "runner", "task")
_NAME = re.compile(rf"^kernelkb_(?:{'|'.join(KINDS)})_(\d+)_")
_swept = False


def folder(kind: str) -> tempfile.TemporaryDirectory[str]:
    """A private folder of ``kind``, named by this process, removed when closed."""
    if kind not in KINDS:
        raise ValueError(f"no private folder of kind {kind!r}: one of {KINDS}")
    return tempfile.TemporaryDirectory(prefix=f"kernelkb_{kind}_{os.getpid()}_",
                                       ignore_cleanup_errors=True)


def sweep(where: str | None = None) -> list[str]:
    """Remove the folders (this user's) of runners that no longer run; the removed."""
    where = where or tempfile.gettempdir()
    removed = []
    for entry in os.scandir(where):
        match = _NAME.match(entry.name)
        if match is None or not entry.is_dir(follow_symlinks=False):
            continue
        if entry.stat(follow_symlinks=False).st_uid != os.geteuid():
            continue
        if _running(int(match.group(1))):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


def sweep_once() -> None:
    """The sweep, the first time a process asks."""
    global _swept
    if not _swept:
        _swept = True
        sweep()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: it runs
        return True
    return True
