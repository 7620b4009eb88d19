"""Tries to reach the judge, its parent process: its memory and its descriptors."""

import os

NUM_WARPS = 4


def _try(action) -> str:
    try:
        action()
        return "open"
    except OSError as err:
        return f"denied ({err.strerror})"


def _open_any(folder: str) -> None:
    """Open any of the judge's descriptors for writing (the runner's result among them)."""
    for fd in range(256):
        try:
            os.close(os.open(f"{folder}/{fd}", os.O_WRONLY))
            return
        except FileNotFoundError:
            continue
    raise PermissionError(13, "Permission denied")


def run(x):
    parent = os.getppid()
    mem = _try(lambda: open(f"/proc/{parent}/mem", "rb").close())
    fds = _try(lambda: _open_any(f"/proc/{parent}/fd"))
    environ = _try(lambda: open(f"/proc/{parent}/environ", "rb").read())
    raise RuntimeError(f"judge mem: {mem}; judge fds: {fds}; judge environ: {environ}")
