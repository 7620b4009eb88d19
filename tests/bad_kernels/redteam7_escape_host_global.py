"""Red team 7 escape probe: host-global state written as the jail's root.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`). run() starts a fresh
Python in the jail and raises its report, so the probe is never ok. ESCAPED is a write
that reached the host; HELD a refusal. Every write puts back the value it read (a no-op
where it succeeds). Tried: the host clock (settimeofday, clock_settime to now), real-time
scheduling (SCHED_FIFO), nice -20, real-time I/O priority, an OOM shield
(oom_score_adj -1000), raising hard limits, the host's usermode-helper hooks
(core_pattern, modprobe, uevent_helper, binfmt_misc register), drop_caches, sysrq, THP;
device nodes (mknod of the first disk), the new mount API (open_tree, fsopen,
mount_setattr clearing read-only on /usr), fanotify, and the judge's oom_score_adj.
"""
import os
import subprocess

CHILD = r'''
import ctypes, os, struct, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def err():
    return os.strerror(ctypes.get_errno())
def rep(tag, what, detail=""):
    print(tag, what, detail, flush=True)
class timeval(ctypes.Structure):
    _fields_ = [("s", ctypes.c_long), ("us", ctypes.c_long)]
tv = timeval(int(time.time()), 0)
rc = libc.settimeofday(ctypes.byref(tv), None)
rep("ESCAPED" if rc == 0 else "HELD", "settimeofday(now)", "" if rc == 0 else err())
ts = (ctypes.c_long * 2)(int(time.time()), 0)
rc = libc.clock_settime(0, ts)
rep("ESCAPED" if rc == 0 else "HELD", "clock_settime(REALTIME, now)", "" if rc == 0 else err())
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    rep("ESCAPED", "SCHED_FIFO granted (a spinning thread starves a host core)")
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
except OSError as e:
    rep("HELD", "SCHED_FIFO", e.strerror)
try:
    os.setpriority(os.PRIO_PROCESS, 0, -20)
    rep("ESCAPED", "nice -20 granted")
except OSError as e:
    rep("HELD", "nice -20", e.strerror)
rc = libc.syscall(251, 1, 0, (1 << 13) | 0)  # ioprio_set(WHO_PROCESS, self, CLASS_RT)
rep("ESCAPED" if rc == 0 else "HELD", "ioprio real-time", "" if rc == 0 else err())
for path, value in (("/proc/self/oom_score_adj", "-1000"), ("/proc/1/oom_score_adj", "1000")):
    try:
        old = open(path).read().strip()
        with open(path, "w") as f:
            f.write(value)
        now = open(path).read().strip()
        tag = "ESCAPED" if path.startswith("/proc/self") else "LEAK(known open)"
        rep(tag, "wrote " + path, f"{old} -> {now}")
        if path.startswith("/proc/1"):
            with open(path, "w") as f:
                f.write(old)
    except OSError as e:
        rep("HELD", "write " + path, e.strerror)
import resource
for lim in (resource.RLIMIT_NOFILE, resource.RLIMIT_CORE, resource.RLIMIT_MEMLOCK,
            resource.RLIMIT_RTPRIO, resource.RLIMIT_NPROC):
    soft, hard = resource.getrlimit(lim)
    try:
        resource.setrlimit(lim, (soft, resource.RLIM_INFINITY))
        tag = "ESCAPED" if hard != resource.RLIM_INFINITY else "LEAK"
        rep(tag, f"raised hard limit {lim}", f"{hard} -> inf")
    except (OSError, ValueError) as e:
        rep("HELD", f"raise hard limit {lim}", e)
for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe",
             "/sys/kernel/uevent_helper", "/proc/sys/vm/drop_caches",
             "/sys/kernel/mm/transparent_hugepage/enabled",
             "/proc/sys/fs/binfmt_misc/register",
             "/proc/sysrq-trigger", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
    try:
        try:
            old = open(path).read()
        except OSError:
            old = ""
        if path.endswith("enabled"):
            old = old[old.index("[") + 1:old.index("]")] if "[" in old else "madvise"
        value = {"/proc/sys/vm/drop_caches": "1", "/proc/sysrq-trigger": "h",
                 "/proc/sys/fs/binfmt_misc/register": ":kkbrt7:E::kkbrt7::/bin/true:",
                 }.get(path, old)
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, value.encode() or b"\n")
            rep("ESCAPED", "wrote host-global " + path, repr(value[:40]))
        except OSError as e:
            rep("HELD", "write " + path, e.strerror)
        finally:
            os.close(fd)
    except OSError as e:
        rep("HELD", "open for write " + path, e.strerror)
rc = libc.mknod(b"/tmp/rt7_sda", 0o060600, os.makedev(8, 0))
if rc == 0:
    try:
        fd = os.open("/tmp/rt7_sda", os.O_RDONLY)
        rep("ESCAPED", "opened a raw disk node made with mknod", os.read(fd, 16))
        os.close(fd)
    except OSError as e:
        rep("HELD", "mknod made but open refused", e.strerror)
else:
    rep("HELD", "mknod block device", err())
libc.syscall.argtypes = None
fd = libc.syscall(428, -100, b"/usr", 1 | 0x80000)  # open_tree(AT_FDCWD, OPEN_TREE_CLONE)
rep("ESCAPED" if fd >= 0 else "HELD", "open_tree clone of /usr", "" if fd >= 0 else err())
fd = libc.syscall(430, b"tmpfs", 0)  # fsopen
rep("ESCAPED" if fd >= 0 else "HELD", "fsopen tmpfs", "" if fd >= 0 else err())
attr = struct.pack("QQQQ", 0, 1, 0, 0)  # clear MOUNT_ATTR_RDONLY
rc = libc.syscall(442, -100, b"/usr", 0, attr, 32)  # mount_setattr
rep("ESCAPED" if rc == 0 else "HELD", "mount_setattr clear read-only on /usr",
    "" if rc == 0 else err())
fd = libc.syscall(300, 0, 0)  # fanotify_init
rep("ESCAPED" if fd >= 0 else "HELD", "fanotify_init", "" if fd >= 0 else err())
try:
    open("/usr/rt7_marker", "w").write("x")
    rep("ESCAPED", "wrote /usr/rt7_marker")
except OSError as e:
    rep("HELD", "write /usr", e.strerror)
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
    report = _launch(CHILD)
    print(report, flush=True)  # also in the stdout tail, whatever kind the verdict is
    raise RuntimeError("probe report (never ok):\n" + report)
