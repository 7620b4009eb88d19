"""Red team 3 (escape, as root): writes to host files and host-global settings from inside
the jail, through numpy's file functions (the open happens in numpy's frame, not this
file's), plus a few system calls that would loosen the jail's limits.

Targets (each a harmless marker or the value already set): the project's kernels package
and the venv's site-packages (a comment-only .pth, which Python reads at every start),
a __pycache__ beside Triton, /usr/lib, /proc/sys/vm/swappiness (61; the host has 60),
/sys/kernel/mm/transparent_hugepage/enabled (its current value), the evaluation's own
cgroup limits (memory.max, pids.max -> max), /proc/self/oom_score_adj -> -1000 (the
worker protected from the OOM killer at the host's expense), SCHED_FIFO (real-time
priority over the host's processes), RLIMIT_CORE raised, the jail's /tmp and /dev/shm
(are they the host's?). Then, as a cross-check, the same writes from a shell through
subprocess. The kernel is an honest softmax; run() raises at the end with what worked,
so the report comes back in error_message. Expects every write to fail; the host is
checked afterwards for each marker.
"""
import os
import resource
import subprocess

import numpy as np
import torch
import triton
import triton.language as tl

import kernelkb.kernels as _kk

_SITE = os.path.dirname(os.path.dirname(triton.__file__))
_KK = list(_kk.__path__)[0]
_TARGETS = [
    (os.path.join(_KK, "redteam3_marker.txt"), "redteam3"),
    (os.path.join(_SITE, "redteam3_marker.pth"), "# redteam3"),
    (os.path.join(_SITE, "triton", "__pycache__", "redteam3_marker.pyc"), "redteam3"),
    ("/usr/lib/redteam3_marker.txt", "redteam3"),
    ("/proc/sys/vm/swappiness", "61"),
    ("/sys/kernel/mm/transparent_hugepage/enabled", "madvise"),
    ("/tmp/redteam3_jail_tmp_marker.txt", "redteam3"),
    ("/dev/shm/redteam3_marker.txt", "redteam3"),
    ("/work/redteam3_marker.txt", "redteam3"),
]


def _np_write(path, text):
    try:
        np.savetxt(path, np.array([text]), fmt="%s")
        return "WROTE"
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}({getattr(e, 'errno', '')})"


def _probe():
    out = []
    try:
        cg = np.lib.npyio.DataSource(None).open("/proc/self/cgroup", "r").read().strip()
        out.append(f"cgroup {cg[-40:]}")
        rel = cg.split("::")[-1]
        for f in ("memory.max", "pids.max"):
            out.append(f"np cgroup {f}: {_np_write('/sys/fs/cgroup' + rel + '/' + f, 'max')}")
    except Exception as e:  # noqa: BLE001
        out.append(f"cgroup read {type(e).__name__}: {e}")
    out.append(f"oom -1000: {_np_write('/proc/self/oom_score_adj', '-1000')}")
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        out.append("SCHED_FIFO: GOT IT")
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except Exception as e:  # noqa: BLE001
        out.append(f"SCHED_FIFO {type(e).__name__}")
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (1 << 20, 1 << 20))
        out.append("RLIMIT_CORE: RAISED")
    except Exception as e:  # noqa: BLE001
        out.append(f"RLIMIT_CORE {type(e).__name__}")
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -10)
        out.append("nice -10: GOT IT")
    except Exception as e:  # noqa: BLE001
        out.append(f"nice {type(e).__name__}")
    for path, text in _TARGETS:
        out.append(f"{path.split('/')[-1]}: {_np_write(path, text)}")
    script = "; ".join(f"(echo {t!r} > {p}) 2>&1 | head -c 80; echo '|'" for p, t in _TARGETS[:6])
    try:
        r = subprocess.run(["/bin/sh", "-c", script + "; id; cat /proc/self/uid_map"],
                           capture_output=True, text=True, timeout=20)
        out.append("sh: " + (r.stdout + r.stderr).replace("\n", " ")[:900])
    except Exception as e:  # noqa: BLE001
        out.append(f"sh {type(e).__name__}: {e}")
    return out


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(out_ptr + row * stride_o + cols, (e / tl.sum(e, 0)).to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    report = _probe()
    raise RuntimeError("REDTEAM3 REPORT: " + " || ".join(report))
