"""The runner's private folders, and the sweep of those whose runner is gone.

Why: a runner killed outright (SIGKILL, the OOM killer, a test's timeout) runs none of
its cleanup, and each evaluation it held left its folders in the temporary directory (red
team 21 counted 29 on one host). The runner's own folder, which the jail never shows,
names its pid and the folders it made beside it; a runner removes, once per process, the
folders of pids that no longer run. The pid stays out of the folder names: the jail shows
the working and task folders, and a name would hand the candidate the host's pid of its
runner (red team 22 read it there). It assumes the temporary directory is not shared with
another PID namespace (a container that mounts the host's /tmp), where a live runner's
pid is not seen.
"""

from __future__ import annotations

import os
import shutil
import tempfile

KINDS = ("sandbox", "runner", "task")
OWNER = "owner"  # in the runner's folder: its pid, then each folder it made, a line each
_swept = False


def folder(kind: str) -> tempfile.TemporaryDirectory[str]:
    """A private folder of ``kind``, removed when closed."""
    if kind not in KINDS:
        raise ValueError(f"no private folder of kind {kind!r}: one of {KINDS}")
    return tempfile.TemporaryDirectory(prefix=f"kernelkb_{kind}_", ignore_cleanup_errors=True)


def claim(runner_folder: str, made: list[str]) -> None:
    """Write in the runner's folder that this process made it and ``made``."""
    with open(os.path.join(runner_folder, OWNER), "x") as handle:
        handle.write("\n".join([str(os.getpid()), *made]) + "\n")


def sweep(where: str | None = None) -> list[str]:
    """Remove the folders (this user's) of runners that no longer run; the removed."""
    where = os.path.realpath(where or tempfile.gettempdir())
    removed = []
    for entry in os.scandir(where):
        if not entry.name.startswith("kernelkb_runner_") or not entry.is_dir(
                follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.geteuid():
            continue
        try:
            with open(os.path.join(entry.path, OWNER)) as handle:
                pid, *made = handle.read().split("\n")
            if _running(int(pid)):
                continue
        except (OSError, ValueError):  # no owner yet (being made), or not ours
            continue
        for path in [*made, entry.path]:
            if _ours(path, where):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def sweep_once() -> None:
    """The sweep, the first time a process asks."""
    global _swept
    if not _swept:
        _swept = True
        sweep()


def _ours(path: str, where: str) -> bool:
    """A folder of one of ``KINDS`` right in ``where``, a real folder, this user's."""
    name = os.path.basename(path)
    return (os.path.realpath(os.path.dirname(path)) == where
            and any(name.startswith(f"kernelkb_{kind}_") for kind in KINDS)
            and os.path.isdir(path) and not os.path.islink(path)
            and os.lstat(path).st_uid == os.geteuid())


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: it runs
        return True
    return True
