"""Other processes on the GPU: a fact an evaluation reports, never held against a kernel.

Why: another process's kernels (a notebook, a training job, a second tuner) share the
GPU's time with the candidate's: its figures move and its interval widens. The judge's
rules are built to hold anyway (the clock rule reads events and the GPU's timestamps in
the same calls; an interleaved comparison gives both arms the same neighbour), so
sharing is said in the result and its text, and the verdict stays the comparison's.

NVML (PyPI ``nvidia-ml-py``, where installed) lists the processes holding a context on
the device; this process and its descendants (the evaluation's worker and judge, other
evaluations of this process, which take turns to time) are not neighbours. Read on the
host side, before the worker starts and after it ends: the jail has no view of other
processes. Where NVML or its process list is not available (no driver, a sandboxed host),
nothing is known and nothing is said.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable


def own_tree(root: int | None = None) -> set[int]:
    """This process (or ``root``) and every descendant, from /proc."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{name}/stat") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(name))
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, ()))
    return tree


def others(pids: Iterable[int], own: set[int]) -> list[int]:
    """The processes on the GPU that are not ours, each once, in order."""
    return sorted({p for p in pids if p not in own})


def gpu_pids(device: int = 0) -> list[int] | None:
    """PIDs holding a context on ``device`` (compute and graphics), or None: unknown."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver, or NVML refused here
        return None
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(device)
        found: list[int] = []
        for reader in (pynvml.nvmlDeviceGetComputeRunningProcesses,
                       pynvml.nvmlDeviceGetGraphicsRunningProcesses):
            found += [int(p.pid) for p in reader(handle)]
        return found
    except Exception:  # noqa: BLE001 - the process list is not supported here
        return None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def shared_note(device: int = 0) -> str | None:
    """"GPU shared with N other process(es) ..." when NVML sees any, else None."""
    pids = gpu_pids(device)
    if not pids:
        return None
    found = others(pids, own_tree())
    if not found:
        return None
    return (f"GPU shared with {len(found)} other process(es) (pid {', '.join(map(str, found[:4]))}"
            f"{', ...' if len(found) > 4 else ''}): timings move with their work and "
            "intervals widen; the verdict is still the interleaved comparison's")


def quiet_window(wait_s: float, poll_s: float = 1.0, device: int = 0) -> str | None:
    """Wait up to ``wait_s`` for the GPU to hold no other process; None once it does (or
    nothing is known), else the note to report with what is then measured anyway."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        note = shared_note(device)
        if note is None or time.monotonic() >= deadline:
            return note
        time.sleep(poll_s)
