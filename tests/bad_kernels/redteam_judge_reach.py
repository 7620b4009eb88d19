"""Red team, judge reach (planted; run by test_redteam_jail.py):
tries to reach the judge (the worker's parent, which alone writes the verdict) through /proc
and pidfds without ptrace, from a child Python process (ctypes is refused in the candidate's
own process): raise the judge's oom_score_adj / oom_adj (which makes the judge, not the
worker, the OOM killer's first pick in the evaluation's cgroup), read its environ, maps,
cwd, root and descriptors, open its memory, and copy its descriptors with pidfd_getfd. It
raises with every attempt that worked, so the test reads them in the error message.
Expected: runtime_error whose message lists nothing but 'judge=...'."""
import ctypes
import os
import subprocess
import sys


def _attempt(found, what, action):
    try:
        result = action()
    except Exception:  # noqa: BLE001 - a refusal is the expected outcome
        return
    if result is not False:
        found.append(what if result is None or result is True else f"{what}: {result}")


def run(x):
    child = subprocess.run([sys.executable, __file__, str(os.getppid())], capture_output=True,
                           text=True)
    raise RuntimeError(child.stdout.strip() or f"the probe failed: {child.stderr[-800:]}")


def _raise_score(judge, name, value):
    path = f"/proc/{judge}/{name}"
    before = open(path).read().strip()
    with open(path, "w") as handle:
        handle.write(value)
    after = open(path).read().strip()
    return f"{before} -> {after}" if after != before else False


def probe(judge):
    libc = ctypes.CDLL(None, use_errno=True)
    found = [f"judge={judge}"]
    _attempt(found, "raised the judge's oom_score_adj",
             lambda: _raise_score(judge, "oom_score_adj", "1000"))
    _attempt(found, "raised the judge's oom_adj", lambda: _raise_score(judge, "oom_adj", "15"))
    _attempt(found, "read the judge's environ",
             lambda: open(f"/proc/{judge}/environ", "rb").read()[:60] or False)
    _attempt(found, "read the judge's maps",
             lambda: open(f"/proc/{judge}/maps").read()[:40] or False)
    _attempt(found, "read the judge's cwd", lambda: os.readlink(f"/proc/{judge}/cwd"))
    _attempt(found, "listed the judge's root",
             lambda: sorted(os.listdir(f"/proc/{judge}/root"))[:5])
    _attempt(found, "read the judge's descriptors", lambda: [
        os.readlink(f"/proc/{judge}/fd/{n}") for n in os.listdir(f"/proc/{judge}/fd")] or False)
    for n in range(3, 12):
        _attempt(found, f"opened the judge's fd {n}",
                 lambda n=n: os.close(os.open(f"/proc/{judge}/fd/{n}", os.O_RDWR)))
    _attempt(found, "opened the judge's memory",
             lambda: os.close(os.open(f"/proc/{judge}/mem", os.O_RDONLY)))
    pidfd = libc.syscall(434, judge, 0)  # pidfd_open
    if pidfd >= 0:
        for n in range(12):
            copied = libc.syscall(438, pidfd, n, 0)  # pidfd_getfd
            if copied >= 0:
                found.append(f"copied the judge's fd {n}: {os.readlink(f'/proc/self/fd/{copied}')}")
    return "PROBE " + " | ".join(found)


if __name__ == "__main__":
    print(probe(int(sys.argv[1])))
