"""Red team 7 escape probe: channels out of the jail that are not files.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`). run() starts a fresh
Python in the jail and raises its report, so the probe is never ok. ESCAPED is a channel
to the host or to another evaluation; LEAK a host fact; HELD a refusal. Tried: abstract
unix sockets the host's daemons listen on (they live in the network namespace) and a
listing of /proc/net/unix; inotify watches on the host paths bound read-only into the
jail (an inode watch sees other processes' opens of the same files: another evaluation
importing kernelkb or torch is a covert channel and a view of the host's activity); the
same watch on the Python prefix; SysV IPC and POSIX message queues; io_uring (outside
seccomp's view of the calls it carries); a file lock on a bound file (flock on a
read-only inode is shared with the host's processes: a one-bit channel between jails).
"""
import os
import subprocess

CHILD = r'''
import ctypes, os, socket, struct, sys, time, select, fcntl
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def err():
    return os.strerror(ctypes.get_errno())
def rep(tag, what, detail=""):
    print(tag, what, detail, flush=True)
for name in ("/tmp/.X11-unix/X0", "/containerd-shim", "/org/kernel/udev/udevd",
             "/run/systemd/private", "dbus-system", "/var/run/docker.sock",
             "/tmp/dbus-session", "@kernelkb", "/run/containerd/containerd.sock"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\0" + name)
        rep("ESCAPED", "connected to abstract socket", name)
    except OSError as e:
        rep("HELD", "abstract " + name, e.strerror)
    finally:
        s.close()
try:
    lines = open("/proc/net/unix").read().splitlines()[1:]
    rep("LEAK" if lines else "HELD", "/proc/net/unix entries", len(lines))
except OSError as e:
    rep("HELD", "/proc/net/unix", e.strerror)
# inotify on bound host paths
paths = {os.path.dirname(os.__file__), "/usr/lib", "/usr/bin", "/etc", sys.prefix}
for entry in [*os.environ.get("PYTHONPATH", "").split(":"), "/usr/lib/python3"]:
    if entry and os.path.isdir(entry):
        paths.add(entry)
try:
    import kernelkb
    paths.add(os.path.dirname(kernelkb.__file__))
except ImportError:
    pass
ifd = libc.inotify_init1(os.O_NONBLOCK)
watched = []
for p in paths:
    wd = libc.inotify_add_watch(ifd, p.encode(), 0x20 | 0x01 | 0x02 | 0x100 | 0x200)
    if wd >= 0:
        watched.append(p)
rep("LEAK" if watched else "HELD", "inotify watches on bound host paths", watched)
events, names = 0, set()
deadline = time.time() + 20
while time.time() < deadline:
    r, _, _ = select.select([ifd], [], [], 1.0)
    if r:
        try:
            data = os.read(ifd, 65536)
        except OSError:
            continue
        i = 0
        while i + 16 <= len(data):
            wd, mask, cookie, n = struct.unpack_from("iIII", data, i)
            names.add(data[i + 16:i + 16 + n].rstrip(b"\0").decode(errors="replace"))
            events += 1
            i += 16 + n
rep("ESCAPED" if events else "HELD",
    "inotify: other processes' opens of bound host files seen from the jail in 20 s",
    f"{events} events, e.g. {sorted(names)[:6]}")
# flock on a bound read-only file: shared inode, shared lock table
target = os.__file__
try:
    fd = os.open(target, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    rep("LEAK", "exclusive flock on a bound host file (a bit other jails see)", target)
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
except OSError as e:
    rep("HELD", "flock on a bound file", e.strerror)
# SysV / POSIX IPC
for p in ("/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem"):
    try:
        n = len(open(p).read().splitlines()) - 1
        rep("ESCAPED" if n > 0 else "HELD", p + " entries visible", n)
    except OSError as e:
        rep("HELD", p, e.strerror)
rep("HELD" if not os.path.exists("/dev/mqueue") else "LEAK", "/dev/mqueue present",
    os.path.exists("/dev/mqueue"))
# io_uring_setup: nr 425
params = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 8, params)
rep("LEAK" if fd >= 0 else "HELD", "io_uring_setup", "allowed" if fd >= 0 else err())
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
