"""Limits per evaluation, not per process: memory and processes for the worker's whole tree.

A limit per process lets a candidate multiply it: three children of 3 GiB each took a
host from 20.0 to 9.6 GiB free. So each evaluation gets a cgroup of its own where the
host lets the runner make one (cgroup v2: ``memory.max``, ``pids.max``; v1: the memory
and pids hierarchies), nested under the runner's own cgroup. The worker joins it before
it execs, so every process and thread the candidate starts is counted there, and the
jail's read-only /sys keeps them from leaving. At the end the cgroup's processes are
killed and it is removed.

Where no cgroup can be made (no permission, a v2 parent with processes of its own), the
evaluation runs with per-process limits only (address space on the CPU, file size
always) and its ``containment`` says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

ROOT = "/sys/fs/cgroup"
# torch + triton map ~3 GiB of virtual address space before any tensor exists.
DEFAULT_CPU_MEM_LIMIT_MB = 8192
HOST_MEM_MB = {False: 8192, True: 32768}  # resident memory of the tree, CPU / GPU host
PIDS_MAX = 512  # processes and threads of the tree (torch starts one per core, and more)
# inputs of a shape the judge re-checks itself: larger ones are left to the worker's check
SPOT_MAX_BYTES = 4 * 2**30
# the largest file any process of the tree may write. The worker hands a re-checked
# shape's outputs to the judge in one memfd (RoPE's q at batch 32 x 4096 tokens is 1 GiB),
# so this is twice the inputs the judge re-checks; disk is bounded apart from this, by
# the size of each writable tmpfs, and memory by the cgroup
FILE_SIZE_MB = 2 * SPOT_MAX_BYTES // 2**20
CGROUP_PREFIX = "kernelkb-"  # an evaluation's cgroup (strays.py finds its processes so)


@dataclass
class Confinement:
    """What run_worker applies: ``preexec`` in the child, ``end`` after it, and ``note``
    for the containment line (empty when the cgroup holds)."""

    cgroups: list[str] = field(default_factory=list)
    address_space_mb: int | None = None
    note: str = ""

    def preexec(self) -> None:
        """In the child, before exec: join the cgroups, then the per-process limits."""
        for path in self.cgroups:
            with open(os.path.join(path, "cgroup.procs"), "w") as handle:
                handle.write("0")
        size = FILE_SIZE_MB * 2**20
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        if self.address_space_mb:
            limit = self.address_space_mb * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    def hit_limit(self) -> str | None:
        """Which limit stopped the tree, if one did (read before ``end``)."""
        for path in self.cgroups:
            events = _read(os.path.join(path, "memory.events"))
            if events and any(line.split()[:1] == ["oom_kill"] and line.split()[1] != "0"
                              for line in events.splitlines()):
                return _read(os.path.join(path, "memory.max")).strip() + " bytes"
            if _read(os.path.join(path, "memory.failcnt")).strip() not in ("", "0"):
                return _read(os.path.join(path, "memory.limit_in_bytes")).strip() + " bytes"
        return None

    def end(self) -> None:
        """Kill what is left in the cgroups, give back what the kernel still holds for
        them, and remove them."""
        for path in self.cgroups:
            for _ in range(50):
                pids = [int(p) for p in _read(os.path.join(path, "cgroup.procs")).split()]
                if not pids:
                    break
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.02)
            reclaim(path)
            with contextlib.suppress(OSError):
                os.rmdir(path)
        self.cgroups = []


def reclaim(path: str) -> None:
    """Free what the host kernel keeps charged to an emptied memory cgroup: page cache
    and reclaimable kernel objects, the dentries among them. Why: a jail's lookups of
    names that do not exist leave negative dentries in the host's cache (red team 10:
    200,000 from one evaluation, ~38 MB), which outlived the evaluation and grew with
    each. Removing the cgroup alone hands them to its parent; this frees them (v2
    ``memory.reclaim``, v1 ``memory.force_empty``). Best effort: an older kernel has
    neither, and the entries then stay until memory pressure."""
    if os.path.exists(os.path.join(path, "memory.reclaim")):
        current = _read(os.path.join(path, "memory.current")).strip()
        if current.isdigit() and int(current):
            with contextlib.suppress(OSError):  # EAGAIN: not all of it could be freed
                _write(path, "memory.reclaim", current)
    elif os.path.exists(os.path.join(path, "memory.force_empty")):
        with contextlib.suppress(OSError):
            _write(path, "memory.force_empty", "0")


@contextlib.contextmanager
def per_evaluation(use_gpu: bool, mem_limit_mb: int | None) -> Iterator[Confinement]:
    """A Confinement for one evaluation: its own cgroup where possible, else rlimits."""
    memory_mb = HOST_MEM_MB[use_gpu] if use_gpu or not mem_limit_mb else mem_limit_mb
    confine = Confinement(address_space_mb=None if use_gpu else
                          (mem_limit_mb or DEFAULT_CPU_MEM_LIMIT_MB))
    try:
        confine.cgroups = make_cgroups(f"{CGROUP_PREFIX}{uuid.uuid4().hex[:12]}", memory_mb)
    except OSError as err:
        confine.note = f"limits per process only (no cgroup: {err})"
    try:
        yield confine
    finally:
        confine.end()


def make_cgroups(name: str, memory_mb: int) -> list[str]:
    """The cgroup folders made for one evaluation (v2: one; v1: memory and pids), with
    the memory and process limits written; OSError naming why when none can be made."""
    made: list[str] = []
    try:
        if os.path.exists(os.path.join(ROOT, "cgroup.controllers")):
            parent = os.path.join(ROOT, _own("").lstrip("/"))
            _enable_controllers(parent)
            path = _make(parent, name)
            made.append(path)
            _write(path, "memory.max", str(memory_mb * 2**20))
            _write(path, "pids.max", str(PIDS_MAX))
            return made
        for controller, files in (("memory", {"memory.limit_in_bytes": memory_mb * 2**20}),
                                  ("pids", {"pids.max": PIDS_MAX})):
            parent = os.path.join(ROOT, controller, _own(controller).lstrip("/"))
            path = _make(parent, name)
            made.append(path)
            for key, value in files.items():
                _write(path, key, str(value))
        return made
    except OSError:
        for path in made:
            with contextlib.suppress(OSError):
                os.rmdir(path)
        raise


def _enable_controllers(parent: str) -> None:
    """v2: let the parent's children use memory and pids (a bare host's root cgroup may
    not); where that is refused, making the limits fails next and says so."""
    enabled = set(_read(os.path.join(parent, "cgroup.subtree_control")).split())
    missing = {"memory", "pids"} - enabled
    if missing:
        with contextlib.suppress(OSError):
            _write(parent, "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(missing)))


def _own(controller: str) -> str:
    """This process's cgroup path in a v1 hierarchy (or v2's, ``controller`` empty)."""
    with open("/proc/self/cgroup") as handle:
        for line in handle:
            _, names, path = line.rstrip("\n").split(":", 2)
            if (not controller and names == "") or controller in names.split(","):
                return path
    raise OSError(f"no {controller or 'unified'} cgroup in /proc/self/cgroup")


def _make(parent: str, name: str) -> str:
    if not os.path.isdir(parent):
        raise OSError(f"{parent} is not a cgroup folder")
    path = os.path.join(parent, name)
    os.mkdir(path)
    return path


def _write(path: str, key: str, value: str) -> None:
    with open(os.path.join(path, key), "w") as handle:
        handle.write(value)


def _read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return ""
