"""Jailbreak probe (a planted candidate, filled in by tests/optimizer/sandbox/test_jailbreak.py):
tries to undo the jail from inside and to reach what the runner reads. It raises with
every attempt that worked, so the test reads them in the error message. The attempts run
in a child Python process: in the candidate's own process the evaluator refuses ctypes
(introspection.py), and the jail must hold without that rule.
Expected: runtime_error whose message lists nothing but 'lock=...'."""
import ctypes
import os
import subprocess
import sys

MARKER = "__MARKER__"
SECRET_FILES = "__SECRET_FILES__".split("|")  # host files that must stay unread
LIBC = None  # the C library, opened in the child


def _attempt(found, what, action):
    try:
        result = action()
    except Exception:  # noqa: BLE001 - a refusal is the expected outcome
        return
    if result is not False:
        found.append(what if result is None or result is True else f"{what}: {result}")


def _ok(code):
    return code == 0 or False


def _lock_line():
    with open("/proc/self/status") as handle:
        fields = dict(line.split(":", 1) for line in handle if ":" in line)
    return ",".join(f"{k}={fields[k].strip()}" for k in ("CapEff", "CapBnd", "NoNewPrivs",
                                                          "Seccomp"))


def run(x):
    child = subprocess.run([sys.executable, __file__], capture_output=True, text=True)
    raise RuntimeError(child.stdout.strip() or f"the probe failed: {child.stderr[-800:]}")


def probe():
    global LIBC
    LIBC = ctypes.CDLL(None, use_errno=True)
    found = [f"lock={_lock_line()}"]
    # undo the jail: remount the root writable, uncover /tmp, new namespaces, old root
    _attempt(found, "remounted / writable", lambda: _ok(LIBC.mount(
        None, b"/", None, ctypes.c_ulong(32 | 4096), None)))
    _attempt(found, "unmounted /tmp", lambda: _ok(LIBC.umount2(b"/tmp", 2)))
    _attempt(found, "made a user namespace", lambda: _ok(LIBC.unshare(0x10000000)))
    _attempt(found, "made a mount namespace", lambda: _ok(LIBC.unshare(0x00020000)))
    _attempt(found, "ran unshare", lambda: subprocess.run(
        ["unshare", "--user", "--map-root-user", "true"], capture_output=True).returncode == 0
        or False)
    _attempt(found, "entered the parent's mount namespace", lambda: _ok(LIBC.setns(
        os.open("/proc/1/ns/mnt", os.O_RDONLY), 0)))
    _attempt(found, "ptrace attached to pid 1", lambda: _ok(LIBC.ptrace(16, 1, None, None)))
    # the host: its secrets, its /dev, other checkouts
    for path in SECRET_FILES:
        _attempt(found, f"read {path}", lambda p=path: open(p).read()[:40])
    _attempt(found, "listed the host's /etc beyond the allow-list",
             lambda: "shadow" in os.listdir("/etc") or False)
    try:  # refused where the jail's /dev is not its root's; either way not the host's
        open(f"/dev/{MARKER}", "w").write("stays in the private /dev")
    except OSError:
        pass
    _attempt(found, "saw a device besides the allowed ones", lambda: sorted(
        n for n in os.listdir("/dev") if n not in (
            "null", "zero", "full", "random", "urandom", "fd", "stdin", "stdout", "stderr",
            "shm", MARKER) and not n.startswith("nvidia")) or False)
    # what the runner reads: nothing of it is in the working tree to replace
    _attempt(found, "found the runner's files", lambda: [
        n for n in os.listdir(os.path.dirname(os.getcwd()) or "/")
        if n in ("result.json", "stdout", "stderr", "request.json")] or False)
    # links and a FIFO where a runner might look: it must neither follow nor block on them
    for name in ("result.json", "stdout", "stderr", "request.json"):
        for folder in (".", ".."):
            path = os.path.join(folder, name)
            try:
                os.symlink(SECRET_FILES[0], path) if name != "result.json" else os.mkfifo(path)
            except OSError:
                pass
    return "PROBE " + " | ".join(found)


if __name__ == "__main__":
    print(probe())
