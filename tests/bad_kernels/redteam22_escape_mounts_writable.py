"""Red team 22 escape probe (softmax, behind the allow-list): what of the host can the worker
write, and which descriptors does it hold?

Not a plant: run with `refuse_imports=False, refuse_surroundings=False,
refuse_introspection=False` and `KERNELKB_DECOY_TOKEN=secret123` in the runner's
environment, `shapes=[(4, 128)]`. `run()` raises with its findings (the message comes
back as the evaluation's error): every mount of `/proc/self/mountinfo` with its root and
file system, every directory it may write (a walk of `/` but `/proc`, `/sys`, `/dev`),
a file created at the root of every read-write mount that is not a tmpfs, its
descriptors, `/tmp`, `/dev/shm`, the home, the judge's `/proc/1/*`, the environment.

Result (2026-12-07 22:20 UTC): `runtime_error`, 4 s. Writable: only tmpfs (the jail's
`/tmp`, 64 MiB, and the working tree `/tmp/kernelkb_sandbox_<pid>_<rand>`, 512 MiB).
The one host read-write mount, `/tmp/kernelkb_task_<pid>_<rand>` (ext4, /dev/vda), is
not writable (EACCES). `/proc/1/fd`, `environ`, `root`: EACCES; `/proc/1/mountinfo`
readable (the same mounts). Descriptors: stdio, the report and data memfds, two pipes.
No `secret123` in the environment. Seen: the host paths bound read-only (`/work/main/
.venv`, `kernels`, `kernelkb`, `optimizer`, `/root/.pyenv/versions/3.11.7`) and the
runner's host pid in the folder names (see redteam22_escape_host_pid_names.py).
"""
import functools

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 0  # columns per tile; 0 = the whole row (next power of two) in one tile
NUM_WARPS = 4
NUM_STAGES = 1
ROWS_PER_PROGRAM = 1  # rows each program handles, to amortise launch for short rows
ONLINE = False  # chunked rows: one online pass for max and sum instead of two passes
LONG_ROW_BLOCK = 0  # rows of LONG_ROW_COLS+ columns: 0 = as BLOCK_SIZE says; N = long-row path
# not a search knob: on the H200 a persistent long-row grid lost (1 program an SM) or tied
# (2); kept for cards whose L2 holds more rows in flight (benchmarks/variants.py --wide 4)
LONG_ROW_PERSISTENT = 0  # long-row path: 0 = a program a row; N = N programs an SM loop over rows
L2_HINTS = False  # long-row path: keep pass 1's reads in L2 for pass 2, stream the output past it

LONG_ROW_COLS = 32768  # where the long-row path starts (not a search knob)


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_rows, n_cols, stride_x, stride_o,
                   BLOCK: tl.constexpr, SINGLE_TILE: tl.constexpr,
                   ONLINE_PASS: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    for r in range(ROWS):
        row = pid.to(tl.int64) * ROWS + r  # 64-bit from the program id on
        if row < n_rows:
            x_row = x_ptr + row.to(tl.int64) * stride_x
            o_row = out_ptr + row.to(tl.int64) * stride_o
            if SINGLE_TILE:
                mask = cols < n_cols
                x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
                e = tl.exp(x - tl.max(x, 0))
                y = e / tl.sum(e, 0)
                tl.store(o_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
            else:
                if ONLINE_PASS:
                    m_vec = tl.full([BLOCK], -float("inf"), tl.float32)
                    s_vec = tl.zeros([BLOCK], tl.float32)
                    for start in range(0, n_cols, BLOCK):
                        mask = start + cols < n_cols
                        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
                        # a NaN must reach the sum (the row is NaN), so the max keeps it
                        m_new = tl.maximum(m_vec, x.to(tl.float32),
                                           propagate_nan=tl.PropagateNan.ALL)
                        # a lane that has seen only -inf adds nothing (not -inf - -inf)
                        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
                        s_vec = s_vec * tl.exp(m_vec - m_safe) + tl.exp(x - m_safe)
                        m_vec = m_new
                    m = tl.max(m_vec, 0)
                    s = tl.sum(s_vec * tl.exp(m_vec - m), 0)
                else:
                    m_vec = tl.full([BLOCK], -float("inf"), tl.float32)
                    for start in range(0, n_cols, BLOCK):
                        mask = start + cols < n_cols
                        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
                        m_vec = tl.maximum(m_vec, x.to(tl.float32))
                    m = tl.max(m_vec, 0)
                    s_vec = tl.zeros([BLOCK], tl.float32)
                    for start in range(0, n_cols, BLOCK):
                        mask = start + cols < n_cols
                        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
                        s_vec += tl.exp(x.to(tl.float32) - m)
                    s = tl.sum(s_vec, 0)
                for start in range(0, n_cols, BLOCK):
                    mask = start + cols < n_cols
                    x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
                    y = tl.exp(x.to(tl.float32) - m) / s
                    tl.store(o_row + start + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_long_row_kernel(out_ptr, x_ptr, n_rows, n_cols, stride_x, stride_o,
                            BLOCK: tl.constexpr, HINTS: tl.constexpr):
    # rows in BLOCK-column chunks, rows pid, pid + programs, ...: pass 1 keeps a running
    # row max and a sum rescaled when the max grows (one exp2 per element); pass 2 walks
    # the chunks backwards, so the ones pass 1 read last are re-read while still in L2
    LOG2E: tl.constexpr = 1.4426950408889634
    cols = tl.arange(0, BLOCK)
    first = tl.program_id(0).to(tl.int64)  # an int64 loop: row * stride passes 2**31
    for row in range(first, n_rows, tl.num_programs(0)):
        x_row = x_ptr + row * stride_x
        o_row = out_ptr + row * stride_o
        m = -float("inf")
        s = 0.0
        for start in range(0, n_cols, BLOCK):
            mask = start + cols < n_cols
            if HINTS:
                x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"),
                            eviction_policy="evict_last")
            else:
                x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
            x = x.to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, 0))
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # a chunk masked whole
            s = s * tl.exp2((m - m_safe) * LOG2E) + tl.sum(tl.exp2((x - m_safe) * LOG2E), 0)
            m = m_new
        inv = 1.0 / s
        n_chunks = tl.cdiv(n_cols, BLOCK)
        for i in range(0, n_chunks):
            start = (n_chunks.to(tl.int64) - 1 - i) * BLOCK
            mask = start + cols < n_cols
            if HINTS:
                x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"),
                            eviction_policy="evict_first")
            else:
                x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
            y = (tl.exp2((x.to(tl.float32) - m) * LOG2E) * inv).to(out_ptr.dtype.element_ty)
            if HINTS:
                tl.store(o_row + start + cols, y, mask=mask, cache_modifier=".cs")
            else:
                tl.store(o_row + start + cols, y, mask=mask)


@functools.cache
def _sm_count(device):
    """SMs of the GPU, for the persistent long-row grid (1 in the CPU interpreter)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 1



import os as _os
import stat as _stat

_DONE = []


def _probe():
    out = []
    add = out.append
    add("id uid=%d euid=%d gid=%d pid=%d ppid=%d" % (_os.getuid(), _os.geteuid(), _os.getgid(), _os.getpid(), _os.getppid()))
    add("cwd=%s" % _os.getcwd())
    try:
        mi = open("/proc/self/mountinfo").read().splitlines()
    except Exception as e:
        mi = []
        add("mountinfo: %r" % e)
    tmpfs_devs = set()
    for line in mi:
        f = line.split()
        sep = f.index("-")
        root, mnt, opts, fstype, src = f[3], f[4], f[5], f[sep + 1], f[sep + 2]
        if fstype not in ("proc", "sysfs", "devpts", "mqueue", "cgroup", "cgroup2"):
            add("mnt %s root=%s %s %s %s" % (mnt, root, opts.split(",")[0], fstype, src))
    # every directory we may write, with the file system it is on
    writable = []
    for top in ("/",):
        for dp, dns, fns in _os.walk(top):
            if dp.startswith(("/proc", "/sys", "/dev")):
                dns[:] = []
                continue
            if _os.access(dp, _os.W_OK):
                try:
                    st = _os.statvfs(dp)
                    writable.append("%s(f_fsid=%x)" % (dp, st.f_fsid))
                except Exception:
                    writable.append(dp)
            if len(writable) > 60:
                break
    add("writable dirs: " + " ".join(writable[:60]))
    # try to write into every non-tmpfs rw mount
    for line in mi:
        f = line.split()
        sep = f.index("-")
        mnt, opts, fstype = f[4], f[5], f[sep + 1]
        if fstype in ("tmpfs", "proc", "sysfs", "devpts", "mqueue", "cgroup", "cgroup2") or not opts.startswith("rw"):
            continue
        p = _os.path.join(mnt, "ESC_rt22_probe")
        try:
            fd = _os.open(p, _os.O_CREAT | _os.O_WRONLY, 0o644)
            _os.write(fd, b"escaped\n")
            _os.close(fd)
            add("WROTE %s" % p)
        except Exception as e:
            add("write %s: %r" % (p, e))
    # descriptors and where they point
    for fd in sorted(_os.listdir("/proc/self/fd"), key=int):
        try:
            add("fd %s -> %s" % (fd, _os.readlink("/proc/self/fd/" + fd)))
        except Exception as e:
            add("fd %s: %r" % (fd, e))
    for p in ("/tmp", "/dev/shm", _os.path.expanduser("~")):
        try:
            add("ls %s: %s" % (p, sorted(_os.listdir(p))[:40]))
        except Exception as e:
            add("ls %s: %r" % (p, e))
    for p in ("/proc/1/fd", "/proc/1/environ", "/proc/1/mountinfo", "/proc/1/root/"):
        try:
            if p.endswith("/"):
                add("%s: %s" % (p, _os.listdir(p)[:20]))
            elif p.endswith("fd"):
                add("%s: %s" % (p, [(x, _os.readlink(p + "/" + x)) for x in _os.listdir(p)]))
            else:
                add("%s: %r" % (p, open(p, "rb").read()[:300]))
        except Exception as e:
            add("%s: %r" % (p, e))
    env = dict(_os.environ)
    add("env names: %s" % sorted(env))
    add("secret123 in env: %s" % any("secret123" in v for v in env.values()))
    return "\n".join(out)


def run(x):
    raise RuntimeError('ESC\n' + _probe())
    lead = x.shape[:-1]  # rows: one dimension, or a model's (batch, seq)
    x = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    if LONG_ROW_BLOCK and n_cols >= LONG_ROW_COLS:
        programs = n_rows
        if LONG_ROW_PERSISTENT:
            programs = min(n_rows, LONG_ROW_PERSISTENT * _sm_count(x.device))
        softmax_long_row_kernel[(programs,)](out, x, n_rows, n_cols, x.stride(0), out.stride(0),
                                             BLOCK=LONG_ROW_BLOCK, HINTS=L2_HINTS,
                                             num_warps=NUM_WARPS)
        return out.view(*lead, n_cols)
    whole_row = triton.next_power_of_2(n_cols)
    block = whole_row if BLOCK_SIZE == 0 else min(BLOCK_SIZE, whole_row)
    grid = (triton.cdiv(n_rows, ROWS_PER_PROGRAM),)
    softmax_kernel[grid](out, x, n_rows, n_cols, x.stride(0), out.stride(0),
                         BLOCK=block, SINGLE_TILE=block >= n_cols, ONLINE_PASS=ONLINE,
                         ROWS=ROWS_PER_PROGRAM, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return out.view(*lead, n_cols)
