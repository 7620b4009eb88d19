"""Contain the worker that runs a candidate: code an LLM wrote.

Each worker starts under ``unshare`` (util-linux, present on any Linux host) in new user,
mount, network and PID namespaces; no root is needed, and as root inside a container it
works the same (seen on this project's CPU host and the lent H200). Then this module,
run as the namespace's first process, lays out the filesystem and execs the worker:

* every mount is remounted read-only, except /dev (GPU device nodes stay usable), /proc
  (a fresh one: only the namespace's own processes, so no parent's environment to read)
  and the evaluation's own directory (request, result, working directory, HOME, TMPDIR,
  Triton cache), the only place it can write;
* the paths to hide (the project, the store, the parent's working directory and HOME,
  /tmp, /dev/shm) are covered by empty tmpfs; the code the worker imports (``kernels``,
  ``optimizer``) and the Python environment are bound back read-only at their own paths;
* the network namespace has only a downed loopback: no connection leaves it;
* the worker is PID 1 of its namespace: when it ends, the kernel kills every process
  left in it, including children that detached with ``setsid``; ``--kill-child`` ends
  the worker if the runner dies.

The environment is scrubbed by the runner (runner.py): only what Python, Triton and CUDA
need. Where namespaces are unavailable (no ``unshare``, user namespaces disabled) the
runner falls back to the scrubbed environment and fresh working directory alone, logs a
warning, and the evaluation's feedback says so (``EvalResult.env['sandbox']``).
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import shutil
import subprocess
import sys
from typing import Any

UNSHARE_FLAGS = ("--user", "--map-root-user", "--mount", "--net", "--pid", "--fork",
                 "--kill-child", "--mount-proc")
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC = 32, 4096, 16384
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME, _MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
_LOCKED_FLAGS = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC,
                 "noatime": _MS_NOATIME, "nodiratime": _MS_NODIRATIME,
                 "relatime": _MS_RELATIME, "strictatime": _MS_STRICTATIME}
_LEFT_WRITABLE = ("/proc", "/dev")


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """None when namespaces work here (probed once per process), else why not."""
    exe = shutil.which("unshare")
    if exe is None:
        return "no unshare binary (util-linux)"
    try:
        probe = subprocess.run([exe, *UNSHARE_FLAGS, "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unshare failed: {err}"
    if probe.returncode != 0:
        return f"unshare refused: {probe.stderr.decode(errors='replace').strip()[:200]}"
    return None


def command(worker_argv: list[str], *, workdir: str, cwd: str, hide: list[str],
            keep: list[str]) -> list[str]:
    """The argv that runs ``worker_argv`` inside the namespaces, laid out as the module
    docstring says: ``workdir`` is the one writable tree, ``cwd`` its working directory."""
    spec = {"workdir": workdir, "cwd": cwd, "hide": hide, "keep": keep}
    # run by path in isolated mode: the package's __init__ would import torch for nothing
    return [shutil.which("unshare") or "unshare", *UNSHARE_FLAGS, sys.executable, "-I",
            os.path.abspath(__file__), json.dumps(spec), "--", *worker_argv]


# -- inside the namespaces --------------------------------------------------------------
_libc = None


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    if _libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} -> {target}: {os.strerror(err)}")


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


def lay_out(spec: dict[str, Any]) -> None:
    workdir = os.path.realpath(spec["workdir"])
    keep = [os.path.realpath(p) for p in spec["keep"] if os.path.isdir(p)]
    hide = sorted({os.path.realpath(p) for p in spec["hide"] if os.path.isdir(p)},
                  key=len)
    hide = [h for i, h in enumerate(hide) if not _under(h, hide[:i])]
    held = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in [*keep, workdir]}
    for path in hide:
        _mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755,size=16m")
    for path, fd in held.items():
        if _under(path, hide):
            os.makedirs(path, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC)
    for path, flags in _mounts():
        if path == workdir or _under(path, list(_LEFT_WRITABLE)):
            continue
        try:
            _mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags)
        except OSError as err:
            if path == "/":
                raise  # the root left writable is no containment
            sys.stderr.write(f"jail: {path} left as it was: {err}\n")
    for fd in held.values():
        os.close(fd)
    os.chdir(spec.get("cwd") or workdir)


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    worker_argv = argv[argv.index("--") + 1:]
    lay_out(spec)
    os.execv(worker_argv[0], worker_argv)
    return 127  # pragma: no cover - execv does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
