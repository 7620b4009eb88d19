"""Red team 11 escape probe: host-wide actions and views that no namespace scopes.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`). run() starts a fresh
Python in the jail that tries what a process of any uid may do to or see of the whole
host kernel, past its namespaces and cgroup:

- `sync()` and `syncfs()` on a bound host filesystem (`/usr`): the host kernel writes
  back every filesystem's dirty pages (the host's, not the jail's: its own writes are on
  tmpfs), an I/O burst the evaluation's cgroup does not bound, repeatable in a loop; the
  host's `Dirty:` count in `/proc/meminfo` before and after is reported;
- `perf_event_open` on the whole of CPU 0 (pid -1): every process of the host counted;
- a `NETLINK_KOBJECT_UEVENT` socket: the host's device events (hot-plug, a GPU reset);
- `/proc/pressure/*`, `/proc/stat`'s fork count: host-global activity.

ESCAPED: `sync()` and `syncfs()` on a host filesystem both succeed from the jail (a
host-wide write-back started by the candidate), or a system-wide perf counter opens.
Nothing is written to the host. The report is raised, so the probe is never ok.
"""
import os
import subprocess

CHILD = r'''
import ctypes, os, socket, struct, time
libc = ctypes.CDLL(None, use_errno=True)
def out(tag, what, detail=""):
    print(tag, what, str(detail)[:300], flush=True)
def dirty():
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("Dirty:"):
                return int(line.split()[1])
    except OSError:
        return None
before = dirty()
ok = []
try:
    libc.sync()
    ok.append("sync")
except Exception as e:
    out("HELD", "sync", e)
try:
    fd = os.open("/usr", os.O_RDONLY)
    rc = libc.syncfs(fd)
    err = ctypes.get_errno()
    os.close(fd)
    if rc == 0:
        ok.append("syncfs(/usr)")
    else:
        out("HELD", "syncfs refused", os.strerror(err))
except OSError as e:
    out("HELD", "syncfs", e)
after = dirty()
if len(ok) == 2:
    out("ESCAPED:", "sync() and syncfs() on the bound host /usr succeed from the jail: a "
        f"host-wide write-back (host Dirty {before} kB -> {after} kB)")
else:
    out("HELD", "write-back", ok)
# perf_event_open(attr, pid=-1, cpu=0): every process on CPU 0
attr = bytearray(128)
struct.pack_into("IIQ", attr, 0, 1, 128, 0)  # PERF_TYPE_SOFTWARE, size, PERF_COUNT_SW_CPU_CLOCK
buf = ctypes.create_string_buffer(bytes(attr), 128)
fd = libc.syscall(298, buf, -1, 0, -1, 0)
if fd >= 0:
    out("ESCAPED:", "perf_event_open on all of CPU 0 (pid -1) opened from the jail")
    os.close(fd)
else:
    out("HELD", "system-wide perf_event_open refused", os.strerror(ctypes.get_errno()))
fd = libc.syscall(298, buf, 0, -1, -1, 0)
out("HELD" if fd < 0 else "LEAK", "perf_event_open on itself", fd)
try:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 15)
    s.bind((0, 1))
    s.settimeout(2.0)
    try:
        msg = s.recv(4096)
        out("LEAK", "host uevent received in the jail", msg[:120])
    except socket.timeout:
        out("HELD", "uevent socket bound, nothing received in 2 s")
    s.close()
except OSError as e:
    out("HELD", "uevent socket refused", e)
for name in ("/proc/pressure/cpu", "/proc/pressure/io", "/proc/pressure/memory"):
    try:
        out("LEAK", name, open(name).read().split("\n")[0])
    except OSError as e:
        out("HELD", name, e.strerror)
try:
    forks = [l for l in open("/proc/stat") if l.startswith("processes")]
    out("LEAK", "/proc/stat host fork count", forks)
except OSError as e:
    out("HELD", "/proc/stat", e.strerror)
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
