"""Red team 10 escape probe: host daemons through unix sockets, the kernel's keyrings, the
worker's inherited descriptors and the host's user list.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`). run() starts a fresh
Python in the jail (round 7's launcher) that:

- walks every folder the jail shows (not /proc or /sys) for unix-domain sockets and FIFOs
  and tries to connect to each socket: a path socket, unlike an abstract one, is not
  scoped by the network namespace, so a host daemon's socket in a bound folder reaches the
  host (ESCAPED on a connect);
- calls add_key(2) and request_key(2) through ctypes: the seccomp filter names keyctl, not
  these two; a key is a kernel object charged to the host uid (ESCAPED where one is made);
- lists the descriptors the worker hands its children and says what each is: a host file
  open for writing would be a write outside (ESCAPED);
- reads /etc/passwd and /etc/group, bound from the host: the host's accounts and home
  folders (LEAK), and whether fd 0 is a terminal (ESCAPED: a host terminal reachable).

The report is raised, so the probe is never ok.
"""
import os
import subprocess

CHILD = r'''
import ctypes, os, socket, stat
def out(tag, what, detail=""):
    print(tag, what, str(detail)[:300], flush=True)
socks, fifos, seen = [], [], 0
for top in sorted(os.listdir("/")):
    if top in ("proc", "sys"):
        continue
    for dirpath, dirnames, files in os.walk("/" + top):
        for name in files + dirnames:
            seen += 1
            p = os.path.join(dirpath, name)
            try:
                mode = os.lstat(p).st_mode
            except OSError:
                continue
            if stat.S_ISSOCK(mode):
                socks.append(p)
            elif stat.S_ISFIFO(mode):
                fifos.append(p)
        if seen > 400000:
            break
out("INFO", f"entries walked: {seen}; sockets {len(socks)}, FIFOs {len(fifos)}", (socks + fifos)[:8])
for p in socks[:50]:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
        s = socket.socket(socket.AF_UNIX, kind)
        s.settimeout(1.0)
        try:
            s.connect(p)
            out("ESCAPED:", f"connected to a unix socket in the jail's folders: {p}", kind)
            break
        except OSError as e:
            out("HELD", f"connect {p} ({kind})", e.strerror)
        finally:
            s.close()
for p in fifos[:20]:
    try:
        fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
        out("ESCAPED:", f"a FIFO open for writing: {p}")
        os.close(fd)
    except OSError as e:
        out("HELD", f"FIFO {p}", e.strerror)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR_ADD_KEY, NR_REQUEST_KEY = 248, 249  # x86_64
for ring, name in ((-4, "user"), (-5, "user session"), (-3, "session"), (-2, "process"), (-1, "thread")):
    payload = b"rt10-key-payload"
    serial = libc.syscall(NR_ADD_KEY, b"user", b"rt10-probe-" + name.encode(), payload,
                          ctypes.c_size_t(len(payload)), ctypes.c_int(ring))
    err = ctypes.get_errno()
    if serial > 0:
        out("ESCAPED:", f"add_key into the {name} keyring made key {serial} (a kernel object of the host uid)")
    else:
        out("HELD", f"add_key ({name} keyring)", os.strerror(err))
serial = libc.syscall(NR_REQUEST_KEY, b"user", b"rt10-probe-user", None, ctypes.c_int(0))
err = ctypes.get_errno()
out("LEAK" if serial > 0 else "HELD", "request_key of the probe's own key", serial if serial > 0 else os.strerror(err))
for fd in range(0, 256):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    try:
        flags = int(open(f"/proc/self/fdinfo/{fd}").read().split("flags:")[1].split()[0], 8)
    except Exception:
        flags = -1
    writable = flags >= 0 and (flags & 3) in (1, 2)
    # the worker's own report and data memfds are the judge's, handed to the worker (round
    # 9's probe; since then no other process may be alive when the judge reads them)
    host_file = target.startswith("/") and not target.startswith(("/dev/null", "/proc/", "/memfd:"))
    tag = "ESCAPED:" if host_file and writable and not target.startswith(("/tmp", "/dev/")) else "INFO"
    out(tag, f"fd {fd} -> {target}", f"writable={writable} tty={os.isatty(fd)}")
    if fd == 0 and os.isatty(0):
        out("ESCAPED:", "fd 0 is a terminal (a host terminal reachable from the jail)", target)
for path in ("/etc/passwd", "/etc/group"):
    try:
        lines = [l for l in open(path).read().splitlines() if l and not l.startswith("#")]
        homes = sorted({l.split(":")[5] for l in lines if l.count(":") >= 6})
        out("LEAK", f"{path}: {len(lines)} entries", [l.split(":")[0] for l in lines][-12:] + homes[-6:])
    except OSError as e:
        out("HELD", path, e.strerror)
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
    for fd in range(3, 1024):
        try:
            os.set_inheritable(fd, True)
        except OSError:
            pass
    report = _launch(CHILD, keep_fds=True, env={})
    print(report, flush=True)
    raise RuntimeError("probe report (never ok):\n" + report)
