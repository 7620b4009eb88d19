"""Contain the worker that runs a candidate: code an LLM wrote.

This module is the evaluation's entry process. It opens what the worker's root will
show while it still can (as the runner's user), then gives up root: run by root, it
becomes ``JAIL_UID`` (an unprivileged host uid, ``nobody``) before it makes new user,
mount, network, PID, UTS and IPC namespaces, so the jail's uid 0 is that unprivileged uid
on the host, never host root. Host-global files (/proc/sys, sysrq-trigger, ...) are
refused to it by the kernel for that reason alone, and masked or read-only besides, as
container runtimes do. No root is needed; the first child is PID 1 of the new PID
namespace and builds the worker's root, then execs the worker:

* the root is a fresh tmpfs holding an allow-list, bound read-only from the host: the
  system paths (/usr, /bin, /lib*, /sys), a few files of /etc (the loader's cache and
  config, passwd, group, ...), the Python that runs the worker and the code it imports
  (``kernels``, ``optimizer``), a user's task copy; then ``pivot_root`` into it and the
  host's root detached, so nothing else of the host (its secrets, other checkouts, the
  store, the runner's own files) exists there;
* writable: the evaluation's working tree (a tmpfs of its own, size-bounded: request
  data, HOME, TMPDIR, Triton cache), a small private /tmp, a fresh /proc (only the
  namespace's processes) and a private /dev holding only null, zero, full, random,
  urandom and the NVIDIA nodes, bound from the host's;
* no way back (``lock_down``): every capability dropped with locked securebits,
  no_new_privs, and a seccomp filter refusing mount, namespace, ptrace and similar calls;
* the network namespace has only a downed loopback: no connection leaves it; the host
  name is ``kernelkb-jail``, not the host's; no core file is ever written;
* the candidate's process has a uid of its own in the jail (``WORKER_UID``), not the
  judge's: host ``WORKER_HOST_UID`` when the runner is root; for another user, the first
  of its subordinate ids (/etc/subuid and /etc/subgid, mapped by the setuid helpers
  newuidmap and newgidmap, as rootless containers do; ``rootless_worker_ids``), and where
  it owns none, the one uid it has. The judge keeps CAP_SETUID and CAP_SETGID (and
  CAP_SETPCAP, to empty its bounding set after) through its exec only to fork the worker
  onto that uid; then the worker holds none and the judge CAP_KILL only (in its
  permitted set, none in its bounding set), to end every other process of the jail
  around the worker's report (strays.py);
* the worker is PID 1 of its namespace: when it ends, the kernel kills every process
  left in it, including children that detached with ``setsid``; it is killed when the
  entry process dies.

The environment is passed by the runner (runner.py) by exact names only. Where
namespaces or the jail are unavailable (user namespaces disabled, a step of the jail
refused: ``mode`` probes it once) the runner falls back to the scrubbed environment and
fresh working directory alone, logs a warning, and the evaluation's feedback says so
(``EvalResult.containment``). A host that refuses user namespaces to an unprivileged
uid but not to root gets the jail with its root mapped to host root (the host-global
files still masked), and the containment line says that too.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import resource
import signal
import subprocess
import sys
from typing import Any

JAIL_UID = 65534  # ``nobody``: the host uid of the jail's root when the runner is root
# A root runner maps a second uid into the jail for the worker (the process that runs the
# candidate), so it cannot signal, limit, renice or reconfigure the judge (the jail's uid
# 0, PID 1): ``become_worker`` takes it. Set in the judge's environment where it exists.
WORKER_UID, WORKER_HOST_UID = 1, 65533
WORKER_ENV = "KERNELKB_JAIL_WORKER_UID"
_CAP_KILL, _CAP_SETGID, _CAP_SETUID, _CAP_SETPCAP = 5, 6, 7, 8
# the judge keeps CAP_KILL for good: it ends every other process of the jail (the worker's
# uid is not its own) around the worker's report (strays.py). It reaches no process
# outside the jail's user namespace
JUDGE_KEEPS = 1 << _CAP_KILL
# the judge's, until it forks: a uid for the worker, and the bounding set emptied after
_TWO_UIDS_KEPT = (1 << _CAP_SETGID) | (1 << _CAP_SETUID) | (1 << _CAP_SETPCAP) | JUDGE_KEEPS
HOST_NAME = "kernelkb-jail"
_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_NAMESPACES = (_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWPID | _CLONE_NEWUTS
               | _CLONE_NEWIPC)
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME, _MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
_LOCKED_FLAGS = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC,
                 "noatime": _MS_NOATIME, "nodiratime": _MS_NODIRATIME,
                 "relatime": _MS_RELATIME, "strictatime": _MS_STRICTATIME}
# host-global files of a fresh /proc (as container runtimes treat them): read-only, or
# covered (a file by /dev/null, a folder by an empty read-only tmpfs)
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
PROC_MASKED = ("kcore", "keys", "timer_list", "sched_debug", "latency_stats", "acpi", "scsi",
               "cmdline",  # the host kernel's command line
               # the host's dentry, inode and open-file counts (red team 10 watched one
               # evaluation's lookups grow the first): what other tenants do, read live
               "sys/fs")


@functools.lru_cache(maxsize=1)
def mode() -> tuple[bool | None, str]:
    """(unprivileged, why) probed once per process: (True, "") where the jail's root is an
    unprivileged host uid; (False, why) where it could only be made as the runner's root;
    (None, why) where no jail can be made here."""
    unprivileged = _probe_jail(unprivileged=True)
    if unprivileged is None:
        return True, ""
    if os.geteuid() == 0 and _probe_jail(unprivileged=False) is None:
        return False, f"the jail's root is the host's root ({unprivileged})"
    return None, unprivileged


def unavailable_reason() -> str | None:
    """None when the jail works here, else why not."""
    usable, why = mode()
    return None if usable is not None else why


def _probe_jail(*, unprivileged: bool, worker_ids: tuple[int, int] | None = None
                ) -> str | None:
    """The whole jail once around a Python that does nothing: a host where the
    namespaces, the new root, the pivot or the lock-down cannot be made says so here,
    before any candidate runs."""
    import tempfile

    python = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    with tempfile.TemporaryDirectory(prefix="kernelkb_jail_probe_") as tmp:
        argv = command([sys.executable, "-I", "-c", "pass"], workdir=tmp, cwd=tmp, hide=[],
                       keep=python, mkdirs=(), unprivileged=unprivileged,
                       worker_ids=worker_ids)
        try:
            probe = subprocess.run(argv, capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"the jail failed: {err}"
    if probe.returncode != 0:
        return f"the jail failed: {probe.stderr.decode(errors='replace').strip()[-300:]}"
    return None


_SUBORDINATE_HELPERS = ("/usr/bin/newuidmap", "/usr/bin/newgidmap")
_NOT_ASKED: Any = object()


@functools.lru_cache(maxsize=1)
def rootless_worker_ids() -> tuple[int, int] | None:
    """(host uid, host gid) of the worker for a runner that is not root: the first id of
    each subordinate range it owns, where the setuid helpers exist and a whole jail with
    them works here (probed once); else None, and the worker shares the judge's uid."""
    if os.geteuid() == 0:
        return None
    ids = _subordinate_ids()
    if ids is None or _probe_jail(unprivileged=True, worker_ids=ids) is not None:
        return None
    return ids


def _subordinate_ids() -> tuple[int, int] | None:
    """The first subordinate uid and gid this user owns (by name or number), or None."""
    import pwd

    uid = os.geteuid()
    try:
        owners = {pwd.getpwuid(uid).pw_name, str(uid)}
    except KeyError:
        owners = {str(uid)}
    firsts = []
    for table, helper in zip(("/etc/subuid", "/etc/subgid"), _SUBORDINATE_HELPERS, strict=True):
        if not os.access(helper, os.X_OK):
            return None
        try:
            with open(table) as handle:
                rows = [line.strip().split(":") for line in handle]
        except OSError:
            return None
        first = next((int(row[1]) for row in rows if len(row) == 3 and row[0] in owners
                      and row[1].isdigit() and row[2].isdigit() and int(row[2]) >= 1), None)
        if first is None:
            return None
        firsts.append(first)
    return firsts[0], firsts[1]


def command(worker_argv: list[str], *, workdir: str, cwd: str, hide: list[str],
            keep: list[str], mkdirs: tuple[str, ...] = ("home", "tmp", "triton"),
            workdir_size: str = "512m", unprivileged: bool | None = None,
            worker_ids: tuple[int, int] | None = _NOT_ASKED,
            layers: dict[str, str] | None = None) -> list[str]:
    """The argv that runs ``worker_argv`` inside the namespaces, laid out as the module
    docstring says: ``workdir`` is the one writable tree (a fresh tmpfs of
    ``workdir_size`` holding ``mkdirs``), ``cwd`` its working directory; ``layers``:
    host folders shown read-only at another path in the jail, by that path (the
    trusted compile cache, trusted_cache.py).
    ``unprivileged``: whether a root runner gives up root first (``mode`` by default);
    ``worker_ids``: a runner that is not root maps these host ids for the worker
    (``rootless_worker_ids`` by default)."""
    if unprivileged is None:
        unprivileged = mode()[0] is not False
    if worker_ids is _NOT_ASKED:
        worker_ids = rootless_worker_ids()
    spec = {"workdir": workdir, "cwd": cwd, "hide": hide, "keep": keep, "mkdirs": list(mkdirs),
            "workdir_size": workdir_size, "unprivileged": unprivileged,
            "worker_ids": list(worker_ids) if worker_ids else None, "layers": layers or {}}
    # run by path in isolated mode: the package's __init__ would import torch for nothing
    return [sys.executable, "-I", os.path.abspath(__file__), json.dumps(spec), "--",
            *worker_argv]


# -- inside the namespaces --------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _ok(result: int, what: str) -> None:
    """A libc call's 0, or OSError naming the call and errno."""
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    _ok(_libc().mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]),
        f"mount {source} -> {target}")


def _mounts() -> list[tuple[str, int]]:
    """(mount point, locked per-mount flags) from /proc/self/mountinfo, parents first."""
    found = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")
            flags = 0
            for option in fields[5].split(","):
                flags |= _LOCKED_FLAGS.get(option, 0)
            found.append((point, flags))
    return found


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


# device nodes the worker sees in its private /dev (each bound from the host's):
# what Python and torch open, and every NVIDIA node (the GPU, its control and UVM nodes)
_DEVICES = ("null", "zero", "full", "random", "urandom")
_DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
              "stderr": "/proc/self/fd/2"}


def _device_nodes() -> list[str]:
    names = list(_DEVICES)
    with contextlib.suppress(OSError):
        names += sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
    return [n for n in names if os.path.exists(f"/dev/{n}")]


def _private_dev(root: str, held: dict[str, int]) -> None:
    """A fresh tmpfs /dev holding only the bound nodes, the links and a small /dev/shm:
    the host's /dev (devtmpfs, host RAM) is not writable, and no other node is there."""
    dev = f"{root}/dev"
    os.makedirs(dev, exist_ok=True)
    _mount("tmpfs", dev, "tmpfs", _MS_NOSUID | _MS_NOEXEC, "mode=755,size=1m")
    for name, fd in held.items():
        _bind(fd, f"{dev}/{name}")
    for name, target in _DEV_LINKS.items():
        os.symlink(target, f"{dev}/{name}")
    os.mkdir(f"{dev}/shm")
    _mount("tmpfs", f"{dev}/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=1777,size=64m")


# The root the worker sees is built from this allow-list (and the kept paths: the code
# it imports, the Python that runs it), not the host's root with holes covered.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys")
ETC_ENTRIES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "localtime",
               "alternatives", "os-release")
# the jail's own /etc/hosts: the host's names its host (and its network)
HOSTS = f"127.0.0.1 localhost {HOST_NAME}\n::1 localhost\n"
# the jail's own accounts: the host's /etc/passwd and /etc/group name its users, their
# home folders and services (red team 10). The jail has its root, the worker's uid and
# the overflow id every unmapped host uid shows as; a uid must resolve (getpass, pwd)
ACCOUNTS = {
    "passwd": "".join(f"{name}:x:{uid}:{uid}:{name}:/:/usr/sbin/nologin\n"
                      for name, uid in (("root", 0), ("worker", WORKER_UID),
                                        ("nobody", JAIL_UID))),
    "group": "".join(f"{name}:x:{gid}:\n" for name, gid in (("root", 0), ("worker", WORKER_UID),
                                                             ("nogroup", JAIL_UID))),
}
# host folders of /sys that show the host: its network (interfaces, MAC addresses; the
# bound /sys is the host's, not the jail's network namespace's), its disks (serials), and
# the cgroup tree (other evaluations' groups and the PIDs in them: red team 9). A GPU
# worker needs none of them (the PCI folders and the NVIDIA nodes stay)
SYS_MASKED = ("/sys/class/net", "/sys/devices/virtual/net", "/sys/class/block",
              "/sys/block", "/sys/devices/virtual/block", "/sys/fs/cgroup")
_MASKED_CLASSES = ("net", "block")  # their devices live anywhere under /sys/devices


def _masked_device_dirs() -> list[str]:
    """Where each network interface and disk really lives under /sys/devices (a PCI or
    virtio card's ``.../net``, ``.../block``): /sys/class/* only links there, and the same
    card's address or disk's serial was readable through /sys/devices and /sys/bus.
    Resolved from the links, no walk."""
    found = set()
    for kind in _MASKED_CLASSES:
        try:
            names = os.listdir(f"/sys/class/{kind}")
        except OSError:
            continue
        found |= {os.path.dirname(os.path.realpath(f"/sys/class/{kind}/{n}")) for n in names}
    return sorted(p for p in found if p.startswith("/sys/devices/")
                  and p.rsplit("/", 1)[-1] in _MASKED_CLASSES)
_MNT_DETACH = 2
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}


def _bind(fd: int, target: str) -> None:
    """Bind what ``fd`` holds (O_PATH) at ``target``, making the mount point first."""
    source = f"/proc/self/fd/{fd}"
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "w").close()
    _mount(source, target, None, _MS_BIND | _MS_REC)
    os.close(fd)


def _shown(keep: list[str]) -> tuple[dict[str, int], dict[str, str]]:
    """Descriptors of everything the new root shows, by its path there, taken before
    anything moves; and the top-level links (/lib -> usr/lib) to recreate as links."""
    held: dict[str, int] = {}
    links: dict[str, str] = {}
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            links[path] = os.readlink(path)
        elif os.path.isdir(path):
            held[path] = os.open(path, os.O_PATH | os.O_DIRECTORY)
    for name in ETC_ENTRIES:
        if os.path.exists(f"/etc/{name}"):
            held[f"/etc/{name}"] = os.open(f"/etc/{name}", os.O_PATH)
    roots = list(held)
    for path in sorted(set(keep), key=len):
        if not _under(path, roots):
            held[path] = os.open(path, os.O_PATH | os.O_DIRECTORY)
            roots.append(path)
    return held, links


def _skeletons(held: dict[str, int], workdir: str) -> list[str]:
    """The folders right under /tmp that lead to a kept path and are not one: each gets a
    tmpfs of its own, made read-only with the rest, so the folders around a checkout in
    /tmp (its root beside kernels/ and optimizer/) are not part of the writable /tmp."""
    tops = {"/tmp/" + p[len("/tmp/"):].split("/")[0] for p in held
            if _under(p, ["/tmp"]) and p != "/tmp" and not _under(p, [workdir])}
    return sorted(tops - set(held) - {workdir})


def build_root(spec: dict[str, Any], held: dict[str, int], links: dict[str, str],
               devices: dict[str, int], hide: list[str], owner: int, *,
               two_uids: bool = False, layers: dict[str, int] | None = None) -> str:
    """Build the worker's root on a tmpfs over the working folder from what ``held``
    shows, and make it read-only but for the working tree (a tmpfs of its own, owned by
    ``owner``: the host uid of the jail's root), /tmp and /dev. Built before the jail's
    user namespace exists, these mounts are locked there: its root cannot undo them."""
    workdir = os.path.realpath(spec["workdir"])
    workdir_mode = "1777" if two_uids else "700"
    root = workdir  # the new root's skeleton, mounted over the (empty) working folder
    _mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755,size=4m")
    for path, size in (("/tmp", "64m"), (workdir, spec.get("workdir_size", "512m"))):
        os.makedirs(root + path, exist_ok=True)  # before the binds: a kept path may lie here
        # shared by the judge and the worker's uid where there are two: sticky, as /tmp
        mode = "1777" if path == "/tmp" else f"{workdir_mode},uid={owner},gid={owner}"
        _mount("tmpfs", root + path, "tmpfs", _MS_NOSUID | _MS_NODEV, f"mode={mode},size={size}")
    for top in _skeletons(held, workdir):  # a kept path under /tmp (a checkout there)
        os.makedirs(root + top, exist_ok=True)
        _mount("tmpfs", root + top, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755,size=1m")
    for path, fd in held.items():
        _bind(fd, root + path)
    for path, target in links.items():
        os.symlink(target, root + path)
    for path in hide:  # a hidden path under a shown one (a store kept in a venv) stays hidden
        if _under(path, list(held)) and os.path.isdir(root + path):
            _mount("tmpfs", root + path, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755,size=1m")
    for path, fd in (layers or {}).items():  # after the hiding: shown wherever they lie
        _bind(fd, root + path)
    _private_dev(root, devices)
    for path in (*SYS_MASKED, *_masked_device_dirs()):
        if os.path.isdir(root + path):
            _mount("tmpfs", root + path, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                   "mode=755,size=4k")
    os.makedirs(f"{root}/etc", exist_ok=True)
    for name, text in (("hosts", HOSTS), *ACCOUNTS.items()):
        with open(f"{root}/etc/{name}", "w") as handle:
            handle.write(text)
        os.chmod(f"{root}/etc/{name}", 0o644)
    os.makedirs(f"{root}/proc", exist_ok=True)
    for name in spec.get("mkdirs", ()):
        made = os.path.join(root + workdir, name)
        os.makedirs(made, exist_ok=True)
        os.chown(made, owner, owner)
        os.chmod(made, int(workdir_mode, 8))
    writable = [root + "/tmp", root + workdir, root + "/dev"]
    for path, flags in _mounts():  # a kept path bound under /tmp is made read-only too
        if not _under(path, [root]) or _under(path, writable):
            continue
        try:
            _mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags)
        except OSError as err:
            if path == root:
                raise  # the root left writable is no containment
            sys.stderr.write(f"jail: {path[len(root):]} left as it was: {err}\n")
    return root


def enter_root(root: str, cwd: str) -> None:
    """In the new PID namespace: its own /proc, host-global files of it masked, then
    ``root`` becomes / and the host's root is detached. ``root`` is bound over itself
    first: pivot_root refuses a mount locked by the namespace that made it."""
    _mount(root, root, None, _MS_BIND | _MS_REC)
    _mount("proc", f"{root}/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    _pivot(root)
    _mask_proc()
    for path, flags in _mounts():
        if _under(path, ["/proc"]) and path != "/proc":
            _mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags)
    os.chdir(cwd)


def _mask_proc() -> None:
    """The host-global files of the fresh /proc bound over themselves (made read-only
    with the rest of the root) or covered: the kernel already refuses writes to them from
    an unprivileged uid; this holds where the jail's root is the host's root too."""
    for name in PROC_READ_ONLY:
        if os.path.exists(f"/proc/{name}"):
            _mount(f"/proc/{name}", f"/proc/{name}", None, _MS_BIND | _MS_REC)
    for name in PROC_MASKED:
        path = f"/proc/{name}"
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                   "size=4k")
        elif os.path.exists(path):
            _mount("/dev/null", path, None, _MS_BIND)


def _pivot(root: str) -> None:
    """``root`` becomes / and the host's root is detached: nothing outside stays reachable."""
    os.chdir(root)
    _ok(_libc().syscall(_SYS_PIVOT_ROOT[os.uname().machine], b".", b"."), "pivot_root")
    _ok(_libc().umount2(b".", _MNT_DETACH), "detaching the old root")
    os.chdir("/")


# -- no way back: what the worker cannot undo -------------------------------------------
# The namespace's first process is root of its user namespace, with every capability in
# it: a candidate holding those could remount what lay_out made read-only, unmount the
# tmpfs over a hidden path, or build a namespace of its own. So before the exec: the
# capabilities go (bounding set, ambient, effective, permitted, inheritable) with the
# securebits that keep root from regaining them, no_new_privs is set, and a seccomp
# filter refuses the calls that change mounts or namespaces or reach other processes.
_PR_SET_SECCOMP, _PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP = 22, 38, 24
_PR_SET_SECUREBITS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 28, 47, 4
_PR_CAP_AMBIENT_RAISE = 2
_SECUREBITS_ALL_LOCKED = 0xEF  # noroot, no_setuid_fixup, keep_caps and ambient, locked
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW, _RET_EPERM, _RET_ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
_CLONE_NEW_FLAGS = 0x7E020080  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
# per architecture: (AUDIT_ARCH, clone, clone3, refused syscalls); inotify and fanotify
# because a watch on a bound host folder sees other processes' opens on the host (red team
# 7's side channel, seen whenever the host was busy), io_uring because its rings run
# operations the filter never sees; sync and syncfs (they flush the whole host's dirty
# data), fadvise and readahead (they evict or load the host's page cache of a bound
# file): red team 11
_SYSCALLS = {
    "x86_64": (0xC000003E, 56, 435, {
        "ptrace": 101, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
        "unshare": 272, "setns": 308, "keyctl": 250, "add_key": 248, "request_key": 249,
        "bpf": 321, "userfaultfd": 323, "process_vm_readv": 310, "process_vm_writev": 311,
        "kexec_load": 246, "init_module": 175, "finit_module": 313, "delete_module": 176,
        "open_by_handle_at": 304, "name_to_handle_at": 303, "swapon": 167, "swapoff": 168,
        "reboot": 169, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
        "fsmount": 432, "fspick": 433, "mount_setattr": 442,
        "inotify_init": 253, "inotify_init1": 294, "inotify_add_watch": 254,
        "fanotify_init": 300, "fanotify_mark": 301, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427,
        "sync": 162, "syncfs": 306, "fadvise64": 221, "readahead": 187}),
    "aarch64": (0xC00000B7, 220, 435, {
        "ptrace": 117, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
        "unshare": 97, "setns": 268, "keyctl": 219, "add_key": 217, "request_key": 218,
        "bpf": 280, "userfaultfd": 282, "process_vm_readv": 270, "process_vm_writev": 271,
        "kexec_load": 104, "init_module": 105, "finit_module": 273, "delete_module": 106,
        "open_by_handle_at": 265, "name_to_handle_at": 264, "swapon": 224, "swapoff": 225,
        "reboot": 142, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
        "fsmount": 432, "fspick": 433, "mount_setattr": 442,
        "inotify_init1": 26, "inotify_add_watch": 27, "fanotify_init": 262,
        "fanotify_mark": 263, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "sync": 81, "syncfs": 267, "fadvise64": 223,
        "readahead": 213}),
}


_SOCKET = {"x86_64": 41, "aarch64": 198}
# calls allowed only with their flags (args[5]) zero: preadv2 and pwritev2, which Python's
# os.preadv uses (the judge reads the worker's tensors so), while RWF_NOWAIT tells which
# host files are in the host's page cache (red team 11)
_FLAGS_ZERO = {"x86_64": (327, 328), "aarch64": (286, 287)}
_AF_VSOCK = 40


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def seccomp_program(machine: str) -> list[tuple[int, int, int, int]]:
    """Classic BPF: another architecture's calls (i386, x32) refused; the listed calls,
    clone with a namespace flag and preadv2/pwritev2 with flags refused (EPERM); clone3,
    whose flags a filter cannot read, answered ENOSYS (libc falls back to clone);
    everything else allowed."""
    arch, clone, clone3, refused = _SYSCALLS[machine]
    ld_abs, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    body: list[tuple[int, int, int, int]] = [(ld_abs, 0, 0, 4), (jeq, 1, 0, arch),
                                             (ret, 0, 0, _RET_EPERM), (ld_abs, 0, 0, 0)]
    if machine == "x86_64":  # the x32 ABI sets bit 30 of the number
        body += [(jset, 0, 1, 0x40000000), (ret, 0, 0, _RET_EPERM)]
    body += [(jeq, 0, 1, clone3), (ret, 0, 0, _RET_ENOSYS)]
    # clone: refuse when its flags (args[0], low word) hold a namespace flag
    body += [(jeq, 0, 3, clone), (ld_abs, 0, 0, 16), (jset, 0, 1, _CLONE_NEW_FLAGS),
             (ret, 0, 0, _RET_EPERM), (ld_abs, 0, 0, 0)]
    # socket: refuse AF_VSOCK, which no network namespace covers (the host's VM ports)
    body += [(jeq, 0, 3, _SOCKET[machine]), (ld_abs, 0, 0, 16), (jeq, 0, 1, _AF_VSOCK),
             (ret, 0, 0, _RET_EPERM), (ld_abs, 0, 0, 0)]
    for number in _FLAGS_ZERO[machine]:
        body += [(jeq, 0, 3, number), (ld_abs, 0, 0, 16 + 8 * 5), (jeq, 1, 0, 0),
                 (ret, 0, 0, _RET_EPERM), (ld_abs, 0, 0, 0)]
    numbers = sorted(set(refused.values()))
    for n, number in enumerate(numbers):  # jump to the EPERM at the end on a match
        body.append((jeq, len(numbers) - n, 0, number))
    body += [(ret, 0, 0, _RET_ALLOW), (ret, 0, 0, _RET_EPERM)]
    return body


def _prctl(option: int, *args: Any) -> int:
    """prctl's result (0 on success); integers passed as unsigned longs, pointers as are."""
    return _libc().prctl(ctypes.c_ulong(option),
                         *(ctypes.c_ulong(a) if isinstance(a, int) else a for a in args))


def _capset(effective: int, permitted: int, inheritable: int) -> None:
    """This process's three sets (the low words; the high ones emptied)."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # (effective, permitted, inheritable) low words, then high
    data[0], data[1], data[2] = effective, permitted, inheritable
    _ok(_libc().capset(header, data), "capset")


def _raise_inheritable(caps: int) -> None:
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    _ok(_libc().capget(header, data), "capget")
    data[2] |= caps
    _ok(_libc().capset(header, data), "capset")


def _drop_capabilities(keep: int = 0) -> None:
    """Every capability gone, but ``keep`` (a mask, low word): raised as ambient first (no
    longer possible once the securebits are locked), so that only it survives the exec."""
    if keep:
        _raise_inheritable(keep)
        for cap in range(32):
            if keep >> cap & 1:
                _ok(_prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, cap, 0, 0), "ambient raise")
    _ok(_prctl(_PR_SET_SECUREBITS, _SECUREBITS_ALL_LOCKED, 0, 0, 0), "securebits")
    cap = 0  # the bounding set, until EINVAL: past the last cap
    while keep >> cap & 1 or _prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    if not keep:
        _ok(_prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "ambient capabilities")
    _capset(keep, keep, keep)


def lock_down(keep: int = 0) -> None:
    """Capabilities dropped (but ``keep``, the judge's two, where the jail has two uids),
    no_new_privs, the seccomp filter; then checked from /proc/self/status, so a host where
    any step silently did nothing fails here."""
    machine = os.uname().machine
    if machine not in _SYSCALLS:
        raise OSError(f"jail: no seccomp table for {machine}")
    _drop_capabilities(keep)
    _ok(_prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    program = seccomp_program(machine)
    filters = (_Filter * len(program))(*(_Filter(*f) for f in program))
    prog = _Program(len(program), filters)
    _ok(_prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")
    status = lock_status()
    if status != {"CapEff": keep, "CapPrm": keep, "CapBnd": keep, "NoNewPrivs": 1,
                  "Seccomp": 2}:
        raise OSError(f"jail: lock-down incomplete: {status}")


def become_worker() -> None:
    """In the judge's forked child, before any candidate code exists: the jail's second
    uid (where a root runner made one), then no capability at all. A no-op outside such a
    jail."""
    if os.environ.get(WORKER_ENV) != str(WORKER_UID):
        return
    os.setresgid(WORKER_UID, WORKER_UID, WORKER_UID)
    os.setresuid(WORKER_UID, WORKER_UID, WORKER_UID)
    # not dumpable, as the judge made it before the fork: a process the candidate starts
    # (its uid) must not open the worker's descriptors (the report's memfd) under /proc
    _ok(_prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")
    drop_kept_capabilities()


def drop_kept_capabilities(keep: int = 0) -> None:
    """The judge's kept capabilities gone but ``keep`` (the judge's ``JUDGE_KEEPS``; the
    worker keeps none), from the bounding set all of them; checked. A no-op outside a
    jail with two uids."""
    if os.environ.get(WORKER_ENV) != str(WORKER_UID):
        return
    for cap in range(32):
        if _TWO_UIDS_KEPT >> cap & 1:
            _ok(_prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), "bounding set")
    _ok(_prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "ambient capabilities")
    _capset(keep, keep, 0)
    status = lock_status()
    if status["CapEff"] != keep or status["CapPrm"] != keep or status["CapBnd"]:
        raise OSError(f"jail: capabilities left: {status}")


def lock_status() -> dict[str, int]:
    """The capability sets, no_new_privs and seccomp mode of this process."""
    out = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key in ("CapEff", "CapPrm", "CapBnd"):
                out[key] = int(value.strip(), 16)
            elif key in ("NoNewPrivs", "Seccomp"):
                out[key] = int(value.strip())
    return out


_PR_SET_DUMPABLE, _PR_SET_PDEATHSIG = 4, 1
_CLONE_NEWCGROUP = 0x02000000
# a cgroup namespace where the kernel has them (4.6+): /proc/self/cgroup reads "/", not
# the host's path to the runner's group (red team 21 read it)
_OTHERS = (_CLONE_NEWNET | _CLONE_NEWPID | _CLONE_NEWUTS | _CLONE_NEWIPC
           | (_CLONE_NEWCGROUP if os.path.exists("/proc/self/ns/cgroup") else 0))


def _unshare(flags: int, uid: int, gid: int) -> None:
    """New namespaces; with a user namespace among them, its uid and gid 0 mapped to
    ``uid`` and ``gid``: the caller's own (one line a process may write for itself) or
    any, written by host root before it made the namespace."""
    _ok(_libc().unshare(ctypes.c_int(flags)), "unshare")
    if flags & _CLONE_NEWUSER:
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"),
                           ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)


def _give_up_root() -> None:
    """Host root becomes ``JAIL_UID`` for good: groups, gid and uid, real and saved."""
    os.setgroups([])
    os.setresgid(JAIL_UID, JAIL_UID, JAIL_UID)
    os.setresuid(JAIL_UID, JAIL_UID, JAIL_UID)
    _ok(_prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")  # its /proc/self is its own


def _relay(child: int) -> None:
    """The entry process outside the new PID namespace: wait for its PID 1 and exit as it
    did (a signal N as 128 + N, never re-raised: no core file, no host-side handler)."""
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    os._exit(128 - code if code < 0 else code)


def _unshare_two_uids(flags: int, map_ids: Any, *, drop: bool = False) -> None:
    """A user namespace (with ``flags``' others) holding two uids: 0, the judge's, and
    ``WORKER_UID``, the worker's. Only a process privileged outside the namespace may
    write a map of two lines: a helper forked before the namespace exists calls
    ``map_ids(pid)`` on this process once it is made, then exits. ``drop`` gives up root
    here first."""
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    helper = os.fork()
    if helper == 0:
        os.close(go_w)
        os.close(done_r)
        code = 1
        try:
            if os.read(go_r, 1) == b"1":
                map_ids(os.getppid())
                os.write(done_w, b"1")
                code = 0
        except BaseException as err:  # noqa: B036 - said on stderr, then refused below
            sys.stderr.write(f"jail: the uid map: {err}\n")
        finally:
            os._exit(code)
    os.close(go_r)
    os.close(done_w)
    try:
        if drop:
            _give_up_root()
        _ok(_libc().unshare(ctypes.c_int(flags)), "unshare")
        with open("/proc/self/setgroups", "w") as handle:  # no group dropped to get past
            handle.write("deny")  # a file's group-denying mode, before the maps exist
        os.write(go_w, b"1")
    finally:
        os.close(go_w)  # an error above: the helper reads nothing and exits
        os.waitpid(helper, 0)
    mapped = os.read(done_r, 1) == b"1"
    os.close(done_r)
    if not mapped:
        raise OSError("jail: the user namespace's two-uid map was refused")


def _map_as_root(judge_uid: int, pid: int) -> None:
    """Host root writes the maps: the judge on ``judge_uid``, the worker on
    ``WORKER_HOST_UID``."""
    lines = f"0 {judge_uid} 1\n{WORKER_UID} {WORKER_HOST_UID} 1\n"
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{pid}/{name}", "w") as handle:
            handle.write(lines)


def _map_subordinate(uid: int, gid: int, worker_ids: tuple[int, int], pid: int) -> None:
    """Another user's maps, through the setuid helpers that check /etc/subuid and
    /etc/subgid: the judge on its own ids, the worker on the first subordinate ones."""
    for helper, own, first in zip(_SUBORDINATE_HELPERS, (uid, gid), worker_ids, strict=True):
        done = subprocess.run([helper, str(pid), "0", str(own), "1", str(WORKER_UID),
                               str(first), "1"], capture_output=True, text=True, timeout=30,
                              env={"PATH": "/usr/bin:/bin"})
        if done.returncode != 0:
            raise OSError(f"{helper}: {done.stderr.strip()[-300:]}")


def main(argv: list[str]) -> int:
    """Host root builds the root in a mount namespace of its own (it can open every kept
    path), gives up root and makes the jail's namespaces, with a second uid for the worker;
    another user makes a user namespace first (its own paths are open to it) and the rest
    after."""
    spec = json.loads(argv[0])
    worker_argv = argv[argv.index("--") + 1:]
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash writes nothing anywhere
    as_root = os.geteuid() == 0
    uid, gid = os.geteuid(), os.getegid()
    drop = as_root and bool(spec.get("unprivileged", True))
    worker_ids = None if as_root or not spec.get("worker_ids") else tuple(spec["worker_ids"])
    two_uids = as_root or worker_ids is not None
    if as_root:
        os.setgroups([])  # host root's groups reach no process of the jail
        _unshare(_CLONE_NEWNS, uid, gid)
    elif worker_ids is not None:
        _unshare_two_uids(_CLONE_NEWUSER | _CLONE_NEWNS,
                          functools.partial(_map_subordinate, uid, gid, worker_ids))
    else:
        _unshare(_CLONE_NEWUSER | _CLONE_NEWNS, uid, gid)
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing mounted here reaches the host
    keep = [os.path.realpath(p) for p in spec["keep"] if os.path.isdir(p)]
    hide = [os.path.realpath(p) for p in spec.get("hide", ()) if os.path.isdir(p)]
    held, links = _shown(keep)
    layers = {target: os.open(source, os.O_PATH | os.O_DIRECTORY)
              for target, source in spec.get("layers", {}).items() if os.path.isdir(source)}
    devices = {n: os.open(f"/dev/{n}", os.O_PATH) for n in _device_nodes()}
    root = build_root(spec, held, links, devices, hide, JAIL_UID if drop else 0,
                      two_uids=two_uids, layers=layers)
    if as_root:
        _unshare_two_uids(_OTHERS | _CLONE_NEWUSER | _CLONE_NEWNS,
                          functools.partial(_map_as_root, JAIL_UID if drop else 0), drop=drop)
    else:
        _unshare(_OTHERS, uid, gid)
    # the runner's death ends the jail: this process first (set after the uid change,
    # which clears it), then its child, PID 1 of the jail, and with it the whole PID
    # namespace. Without it a runner killed mid-evaluation left the candidate running.
    _ok(_prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "parent death signal")
    child = os.fork()
    if child:
        _relay(child)
    _ok(_prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "parent death signal")
    enter_root(root, spec.get("cwd") or os.path.realpath(spec["workdir"]))
    _ok(_libc().sethostname(HOST_NAME.encode(), len(HOST_NAME)), "sethostname")
    lock_down(_TWO_UIDS_KEPT if two_uids else 0)
    env = {**os.environ, WORKER_ENV: str(WORKER_UID)} if two_uids else dict(os.environ)
    os.execve(worker_argv[0], worker_argv, env)
    return 127  # pragma: no cover - execve does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
