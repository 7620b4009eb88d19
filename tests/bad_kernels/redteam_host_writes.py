"""Red team, host writes (planted; filled in by test_redteam_jail.py):
tries to change the host or gain privilege, from a child Python process (ctypes is refused
in the candidate's own process):
- a marker file in every host path the jail shows (the checkout's bound packages and
  venv, the Python prefix, /usr, /etc, /sys/fs/cgroup, /proc) and in the jail's own /tmp,
  /dev/shm and working tree (the test checks the host's /tmp and /dev/shm for it);
- host-global files: /proc/sys (core_pattern, overcommit_memory: the value read is written
  back, so a success changes nothing), /proc/sysrq-trigger and binfmt_misc's register
  (opened for writing only);
- the evaluation's cgroups (memory.limit_in_bytes, pids.max: written back unchanged) and
  the host's root cgroup.procs (opened for writing only);
- a block device node of the host's disk (the device of /usr) made with mknod, then read;
- privilege: every capability through capset, the ambient set, RLIMIT_CORE raised, a user
  namespace through unshare, clone3 and the i386 entry (int 0x80), a mount through the
  setuid-root mount/umount;
- the host's keyrings: add_key of a key named after the marker (the test reads /proc/keys);
- links in the working tree and the Triton cache to a marker path in the checkout, which
  the runner would create if it ever wrote through them.
It raises with every attempt that worked, so the test reads them in the error message.
Expected: runtime_error whose message lists nothing but 'uid_map=...'."""
import ctypes
import mmap
import os
import resource
import subprocess
import sys

MARKER = "__MARKER__"
PROJECT = "__PROJECT__"
LIBC = None  # the C library, opened in the child
# i386 syscall from 64-bit code: eax=nr, ebx/ecx/edx = the arguments, int 0x80
I386 = bytes([0x53, 0x89, 0xF8, 0x89, 0xF3, 0x49, 0x89, 0xC8, 0x89, 0xD1, 0x44, 0x89, 0xC2,
              0xCD, 0x80, 0x48, 0x63, 0xC0, 0x5B, 0xC3])
CLONE_NEWUSER = 0x10000000


def _attempt(found, what, action):
    try:
        result = action()
    except Exception:  # noqa: BLE001 - a refusal is the expected outcome
        return
    if result is not False:
        found.append(what if result is None or result is True else f"{what}: {result}")


def run(x):
    child = subprocess.run([sys.executable, __file__], capture_output=True, text=True)
    raise RuntimeError(child.stdout.strip() or f"the probe failed: {child.stderr[-800:]}")


def _ok(code):
    return code == 0 or False


def _write_marker(folder):
    with open(os.path.join(folder, f"redteam_{MARKER}"), "w") as handle:
        handle.write("written from inside the jail")


def _write_back(path):
    value = open(path).read()
    with open(path, "w") as handle:
        handle.write(value)


def _open_for_writing(path):
    os.close(os.open(path, os.O_WRONLY))


def _in_child(action):
    """Run action in a forked child (a namespace or a crash stays there); True if it said so."""
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if action() else 1)
        except BaseException:  # noqa: BLE001 - any failure is a refusal
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0 or False


def _i386(nr, a=0, b=0, c=0):
    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(I386)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    call = ctypes.CFUNCTYPE(ctypes.c_long, *[ctypes.c_long] * 4)(address)
    return call(nr, a, b, c)


def _clone3_user():
    args = (ctypes.c_uint64 * 11)(CLONE_NEWUSER, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0)
    pid = LIBC.syscall(435, ctypes.byref(args), 88)
    if pid == 0:
        LIBC.syscall(231, 0)  # exit_group in the child, before Python runs
    if pid > 0:
        os.waitpid(pid, 0)
    return pid > 0 or False


def _capabilities():
    """Capabilities held, or any one raised through capset: none is the jail's answer."""
    status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    held = {k: int(status[k], 16) for k in ("CapEff", "CapPrm", "CapAmb")}
    if any(held.values()):
        return f"held {held}"
    gained = []
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    for bit in range(int(open("/proc/sys/kernel/cap_last_cap").read()) + 1):
        low, high = (1 << bit) & 0xFFFFFFFF, (1 << bit) >> 32
        data = (ctypes.c_uint32 * 6)(low, low, 0, high, high, 0)  # effective, permitted
        if LIBC.capset(header, data) == 0:
            gained.append(bit)
    return gained or False


def _mknod_disk(folder):
    device = os.stat("/usr").st_dev
    path = os.path.join(folder, f"redteam_disk_{MARKER}")
    os.mknod(path, 0o600 | 0o060000, device)  # S_IFBLK
    with open(path, "rb") as handle:
        return f"{len(handle.read(512))} bytes of {os.major(device)}:{os.minor(device)}"


def _mounts():
    return open("/proc/self/mountinfo").read()


def _setuid_mount():
    before = _mounts()
    target = os.path.join(os.getcwd(), f"redteam_mnt_{MARKER}")
    os.makedirs(target, exist_ok=True)
    subprocess.run(["/usr/bin/mount", "-t", "tmpfs", "none", target], capture_output=True)
    subprocess.run(["/usr/bin/umount", "-l", "/tmp"], capture_output=True)
    return _mounts() != before or False


def _cgroup_dirs():
    for line in open("/proc/self/cgroup"):
        _, controllers, path = line.strip().split(":", 2)
        for name in ("memory", "pids"):
            if name in controllers.split(","):
                yield name, f"/sys/fs/cgroup/{name}{path}"


def _add_key(keyring):
    serial = LIBC.syscall(248, b"user", f"redteam_{MARKER}".encode(), b"x", 1, keyring)
    return serial > 0 or False


def probe():
    global LIBC
    LIBC = ctypes.CDLL(None, use_errno=True)
    found = [f"uid_map={' '.join(open('/proc/self/uid_map').read().split())}"]
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))
    host_folders = [PROJECT, os.path.join(PROJECT, "kernelkb"), os.path.join(PROJECT, "kernels"),
                    os.path.join(PROJECT, "optimizer"), os.path.join(PROJECT, ".venv"), prefix,
                    "/usr", "/usr/bin", "/etc", "/sys/fs/cgroup", "/proc"]
    for folder in host_folders:
        _attempt(found, f"wrote a file in {folder}", lambda f=folder: _write_marker(f))
    for folder in ("/tmp", "/dev/shm", os.getcwd(), os.environ.get("TMPDIR", "/tmp")):
        try:  # the jail's own: allowed, and the test checks the host never sees them
            _write_marker(folder)
        except OSError:
            pass
    for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/overcommit_memory"):
        _attempt(found, f"wrote {path}", lambda p=path: _write_back(p))
    for path in ("/proc/sysrq-trigger", "/proc/sys/fs/binfmt_misc/register",
                 "/sys/fs/cgroup/memory/cgroup.procs", "/sys/fs/cgroup/unified/cgroup.procs",
                 "/sys/fs/cgroup/pids/cgroup.procs"):
        _attempt(found, f"opened {path} for writing", lambda p=path: _open_for_writing(p))
    for name, folder in _cgroup_dirs():
        knob = "memory.limit_in_bytes" if name == "memory" else "pids.max"
        path = os.path.join(folder, knob)
        _attempt(found, f"wrote the evaluation's {knob}", lambda p=path: _write_back(p))
    for folder in ("/dev", os.getcwd()):
        _attempt(found, f"made and read the host's disk in {folder}",
                 lambda f=folder: _mknod_disk(f))
    _attempt(found, "held or gained capabilities", _capabilities)
    _attempt(found, "raised an ambient capability",
             lambda: _ok(LIBC.prctl(47, 2, 21, 0, 0)))  # PR_CAP_AMBIENT_RAISE CAP_SYS_ADMIN
    _attempt(found, "raised the core-file limit", lambda: resource.setrlimit(
        resource.RLIMIT_CORE, (1 << 20, 1 << 20)))
    _attempt(found, "made a user namespace (unshare)",
             lambda: _in_child(lambda: LIBC.unshare(CLONE_NEWUSER) == 0))
    _attempt(found, "made a user namespace (clone3)", lambda: _in_child(_clone3_user))
    _attempt(found, "made a user namespace (i386 unshare)",
             lambda: _in_child(lambda: _i386(310, CLONE_NEWUSER) == 0))
    _attempt(found, "mounted through setuid mount/umount", _setuid_mount)
    for keyring, name in ((-3, "session"), (-4, "user"), (-5, "user session")):
        _attempt(found, f"added a key to the {name} keyring", lambda k=keyring: _add_key(k))
    target = os.path.join(PROJECT, f"redteam_{MARKER}_via_link")
    for folder in (os.getcwd(), os.environ.get("TRITON_CACHE_DIR", ""),
                   os.environ.get("HOME", ""), os.environ.get("TMPDIR", "")):
        try:
            if folder:
                os.symlink(target, os.path.join(folder, f"redteam_link_{MARKER}"))
        except OSError:
            pass
    return "PROBE " + " | ".join(found)


if __name__ == "__main__":
    print(probe())
