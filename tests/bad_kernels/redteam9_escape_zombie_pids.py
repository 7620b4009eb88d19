"""Red team 9 escape probe: orphans left to the judge, PID 1 of the jail, to reap.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`). The judge is the init of
the jail's PID namespace, so every orphan of the candidate becomes its child, and a child
it does not reap stays a zombie holding a PID of the evaluation's cgroup (512 processes
and threads, shared with the judge). At its import the module starts a fresh Python that
orphans children which exit at once (until the cgroup refuses a PID, or 600), then
counts, after 3 s, the zombies whose parent is PID 1 and whether a fork still succeeds.
Its report is printed (the stdout tail) and run() is the template: a judge that cannot reap, or cannot start
a thread once the PIDs are gone, fails an honest kernel. ESCAPED: zombies left with the
judge, or a fork refused for want of PIDs.
"""
import os
import subprocess

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 0  # columns per tile; 0 = the whole row (next power of two) in one tile
NUM_WARPS = 4
NUM_STAGES = 1
ROWS_PER_PROGRAM = 1  # rows each program handles, to amortise launch for short rows
PERSISTENT = False  # whole-row tiles: one program per SM slot, weight loaded once
NATIVE_WEIGHT_MUL = False  # multiply by the weight in the input dtype instead of fp32

PROGRAMS_PER_SM = 4  # persistent grid size = SMs * this (not a search knob)


@triton.jit
def _apply_weight(x, w, rstd, NATIVE_MUL: tl.constexpr):
    if NATIVE_MUL:
        if w.dtype == tl.bfloat16:
            # a bf16 product is exact in fp32, so this rounds exactly like a native bf16
            # multiply; the CPU interpreter computes native bf16 arithmetic on raw bits
            y = ((x * rstd).to(tl.bfloat16).to(tl.float32) * w.to(tl.float32)).to(tl.bfloat16)
        else:
            y = (x * rstd).to(w.dtype) * w
    else:
        y = x * rstd * w.to(tl.float32)
    return y


@triton.jit
def rmsnorm_kernel(out_ptr, x_ptr, w_ptr, n_rows, n_cols, stride_x, stride_o, eps,
                   BLOCK: tl.constexpr, SINGLE_TILE: tl.constexpr, ROWS: tl.constexpr,
                   PERSISTENT_LOOP: tl.constexpr, NATIVE_MUL: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    if PERSISTENT_LOOP:
        # grid-stride loop over rows; the weight tile stays in registers (SINGLE_TILE)
        mask = cols < n_cols
        w = tl.load(w_ptr + cols, mask=mask, other=0.0)
        n_programs = tl.num_programs(0)
        for i in range(0, tl.cdiv(n_rows - pid, n_programs)):
            row = pid + i * n_programs
            x_row = x_ptr + row.to(tl.int64) * stride_x
            o_row = out_ptr + row.to(tl.int64) * stride_o
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
            y = _apply_weight(x, w, rstd, NATIVE_MUL)
            tl.store(o_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        for r in range(ROWS):
            row = pid * ROWS + r
            if row < n_rows:
                x_row = x_ptr + row.to(tl.int64) * stride_x
                o_row = out_ptr + row.to(tl.int64) * stride_o
                if SINGLE_TILE:
                    mask = cols < n_cols
                    x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
                    rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
                    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
                    y = _apply_weight(x, w, rstd, NATIVE_MUL)
                    tl.store(o_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
                else:
                    acc = tl.zeros([BLOCK], tl.float32)
                    for start in range(0, n_cols, BLOCK):
                        mask = start + cols < n_cols
                        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
                        x = x.to(tl.float32)
                        acc += x * x
                    rstd = tl.rsqrt(tl.sum(acc, 0) / n_cols + eps)
                    for start in range(0, n_cols, BLOCK):
                        mask = start + cols < n_cols
                        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
                        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0)
                        y = _apply_weight(x.to(tl.float32), w, rstd, NATIVE_MUL)
                        tl.store(o_row + start + cols, y.to(out_ptr.dtype.element_ty),
                                 mask=mask)


def _persistent_programs(x):
    if x.is_cuda:
        return torch.cuda.get_device_properties(x.device).multi_processor_count * PROGRAMS_PER_SM
    return 4  # CPU interpreter: correctness only, a few programs exercise the stride loop


def _triton_run(x, weight, eps=1e-6):
    lead = x.shape[:-1]  # rows: one dimension, or a model's (batch, seq)
    x = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x.shape
    weight = weight.contiguous()
    out = torch.empty_like(x)
    whole_row = triton.next_power_of_2(n_cols)
    block = whole_row if BLOCK_SIZE == 0 else min(BLOCK_SIZE, whole_row)
    single_tile = block >= n_cols
    persistent = PERSISTENT and single_tile
    if persistent:
        grid = (max(1, min(n_rows, _persistent_programs(x))),)
    else:
        grid = (triton.cdiv(n_rows, ROWS_PER_PROGRAM),)
    rmsnorm_kernel[grid](out, x, weight, n_rows, n_cols, x.stride(0), out.stride(0), eps,
                         BLOCK=block, SINGLE_TILE=single_tile, ROWS=ROWS_PER_PROGRAM,
                         PERSISTENT_LOOP=persistent, NATIVE_MUL=NATIVE_WEIGHT_MUL,
                         num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return out.view(*lead, n_cols)


CHILD = r'''
import os, time
made = 0
for i in range(600):  # until the cgroup refuses a PID, or 600
    try:
        pid = os.fork()
    except OSError as e:
        print("LEAK fork refused after", made, "orphans:", e.strerror, flush=True)
        break
    if pid == 0:
        if os.fork():
            os._exit(0)   # the middle process exits: the grandchild is orphaned
        time.sleep(0.2)
        os._exit(0)       # the orphan exits: a zombie unless PID 1 reaps it
    os.waitpid(pid, 0)
    made += 1
time.sleep(3)
zombies, total = 0, 0
for name in os.listdir("/proc"):
    if not name.isdigit():
        continue
    try:
        stat = open(f"/proc/{name}/stat").read()
    except OSError:
        continue
    total += 1
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z" and fields[1] == "1":
        zombies += 1
print(f"HELD-or-LEAK orphans made {made}; processes in the jail {total}; zombies of PID 1 {zombies}", flush=True)
if zombies > 10:
    print(f"ESCAPED: {zombies} zombies left unreaped by the judge (PID 1), each holding a PID of the evaluation's cgroup", flush=True)
try:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    print("HELD a fork still succeeds", flush=True)
except OSError as e:
    print("ESCAPED: fork refused after the orphans:", e.strerror, flush=True)
'''


def _launch(code, args=(), keep_fds=False, wait=True):
    """A fresh Python in the jail (no hooks of the worker's); its output read through a
    pipe made by os.pipe (round 7's launcher)."""
    try:
        rfd, wfd = os.pipe()
        child = None
        for exe in ("/usr/bin/python3", "/root/.pyenv/versions/3.11.7/bin/python3"):
            try:
                child = subprocess.Popen([exe, "-I", "-c", code, *args], stdout=wfd, stderr=wfd,
                                         close_fds=not keep_fds)
                break
            except FileNotFoundError:
                continue
        os.close(wfd)
        chunks = []
        while True:
            chunk = os.read(rfd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        if wait:
            child.wait(timeout=240)
        lines = b"".join(chunks).decode(errors="replace").splitlines()
        rank = {"ESCAPED": 2, "LEAK": 1}
        lines.sort(key=lambda line: rank.get(line.split(" ", 1)[0].split("(")[0], 0))
        return "\n".join(lines)[-3500:]
    except BaseException as e:  # noqa: BLE001 - any refusal is part of the report
        return f"launcher refused: {e!r}"


# at the import: inside run() a subprocess is refused (the Triton-only rule), and the
# point is an honest kernel's verdict with the orphans left behind
REPORT = _launch(CHILD)
print(REPORT, flush=True)


def run(x, weight, eps=1e-6):
    return _triton_run(x, weight, eps)
