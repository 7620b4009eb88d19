"""The candidate's processes beside the worker: none may write the worker's report.

The worker reports into a memfd of the judge's. A process the candidate starts can keep
that descriptor (made inheritable), detach, and write over the report between the
worker's last write and the judge's read (red team 9: a child adopted by the judge
rewrote the report the judge relayed). So, around the report:

- before its final report the worker ends every other process of the evaluation but
  the judge, and waits until none is alive (``end``);
- the judge takes a final report only while no process but the worker is alive
  (``alive``; else the verdict is ``cheat_tamper``);
- once the worker is gone the judge ends every other process before it reads the report
  a last time and writes the verdict.

Which processes are the evaluation's: in the jail, every process of its PID namespace
(its fresh /proc shows only those; the judge is its PID 1, out of the worker's reach,
and keeps CAP_KILL to reach the worker's uid). Without a PID namespace (uncontained),
those of the evaluation's own cgroup (``limits.per_evaluation``); where none was made,
none is found and nothing is ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from kernelkb.optimizer.sandbox import limits


def alive(judge_pid: int, spare: tuple[int, ...] = ()) -> list[int]:
    """Live processes of the evaluation but the judge, the caller and ``spare``. Zombies
    do not count: a dead process holds no descriptor."""
    skip = {judge_pid, os.getpid(), *spare}
    found = []
    for pid in _members(judge_pid):
        if pid in skip:
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue  # gone
        if stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X"):
            found.append(pid)
    return found


def end(judge_pid: int, wait_s: float = 5.0) -> list[int]:
    """SIGKILL to every process of the evaluation but the judge and the caller, again
    until none is alive (a process may fork before its signal lands), for at most
    ``wait_s``; returns those still alive."""
    deadline = time.monotonic() + wait_s
    while True:
        left = alive(judge_pid)
        if not left or time.monotonic() > deadline:
            return left
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)


def _members(judge_pid: int) -> list[int]:
    if judge_pid == 1:  # the jail: its /proc is its PID namespace's
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    try:
        with open("/proc/self/cgroup") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    for line in lines:  # v2 "0::/path", v1 "N:pids:/path"
        _, names, path = line.split(":", 2)
        if os.path.basename(path).startswith(limits.CGROUP_PREFIX):
            procs = os.path.join(limits.ROOT, names, path.lstrip("/"), "cgroup.procs")
            try:
                with open(procs) as handle:
                    return [int(pid) for pid in handle.read().split()]
            except (OSError, ValueError):
                continue
    return []
