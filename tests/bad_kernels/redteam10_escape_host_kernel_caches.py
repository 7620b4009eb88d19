"""Red team 10 escape probe: host kernel objects made from the jail that outlive it.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`). run() starts a fresh
Python in the jail that looks up 200,000 names that do not exist under a bound host
folder (`/usr/lib`): each failed lookup leaves a negative dentry in the host kernel's
dentry cache, which stays after the evaluation (until memory pressure) and, on a host
without kernel-memory accounting, outside the evaluation's memory limit. It reads the
host-global counters before and after (`/proc/sys/fs/dentry-state`, readable though
`/proc/sys` is bound read-only), and the host-global lock table (`/proc/locks`: every
file lock on the host, with its device and inode). ESCAPED: the host's dentry count grew
by at least half the names looked up (host kernel memory the evaluation left behind).
The report is raised, so the probe is never ok.
"""
import os
import subprocess

CHILD = r'''
import os, random
def out(tag, what, detail=""):
    print(tag, what, str(detail)[:300], flush=True)
def state():
    try:
        return [int(v) for v in open("/proc/sys/fs/dentry-state").read().split()]
    except OSError as e:
        return None
N = 200000
before = state()
tag = "%08x" % random.getrandbits(32)
for i in range(N):
    try:
        os.stat(f"/usr/lib/rt10-{tag}-{i}")
    except OSError:
        pass
after = state()
if before and after:
    grown = after[0] - before[0]
    neg = (after[4] - before[4]) if len(after) > 4 else None
    out("ESCAPED:" if grown >= N // 2 else "HELD",
        f"host dentry cache grew by {grown} ({neg} negative) after {N} failed lookups in /usr/lib",
        f"before {before} after {after}")
else:
    out("HELD", "dentry-state unreadable")
try:
    locks = open("/proc/locks").read().splitlines()
    out("LEAK" if locks else "HELD", f"/proc/locks: {len(locks)} host locks listed", locks[:4])
except OSError as e:
    out("HELD", "/proc/locks", e.strerror)
try:
    inodes = open("/proc/sys/fs/inode-state").read().split()
    files = open("/proc/sys/fs/file-nr").read().split()
    out("LEAK", "host-wide inode and file counts", (inodes[:2], files))
except OSError as e:
    out("HELD", "inode-state", e.strerror)
print("done", flush=True)
'''


def _launch(code, args=(), keep_fds=False, wait=True, env=None):
    """A fresh Python in the jail (no hooks of the worker's); its output read through a
    pipe made by os.pipe (round 7's launcher)."""
    try:
        rfd, wfd = os.pipe()
        child = None
        for exe in ("/usr/bin/python3", "/root/.pyenv/versions/3.11.7/bin/python3"):
            try:
                child = subprocess.Popen([exe, "-I", "-c", code, *args], stdout=wfd, stderr=wfd,
                                         close_fds=not keep_fds, env=env, stdin=None)
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
        if wait:
            child.wait(timeout=240)
        lines = b"".join(chunks).decode(errors="replace").splitlines()
        rank = {"ESCAPED": 2, "LEAK": 1}
        lines.sort(key=lambda line: rank.get(line.split(" ", 1)[0].split("(")[0], 0))
        return "\n".join(lines)[-3500:]
    except BaseException as e:  # noqa: BLE001 - any refusal is part of the report
        return f"launcher refused: {e!r}"




def run(x, weight, eps=1e-6):
    report = _launch(CHILD, env={})
    print(report, flush=True)
    raise RuntimeError("probe report (never ok):\n" + report)
