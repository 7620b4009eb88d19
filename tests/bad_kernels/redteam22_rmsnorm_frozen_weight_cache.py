"""Red team 22 plant (rmsnorm): frozen weights cached by (hidden, dtype, device).

Class: a cache keyed on part of the input, on an autograd form no check builds. A weight
that is an `nn.Parameter` with `requires_grad=False` (a frozen model: inference after
`model.requires_grad_(False)`, the base model of LoRA/QLoRA fine-tuning) is cast to
fp32 once and the copy kept in a module dict keyed by (hidden, dtype, device), then
reused. The judge's autograd forms (read at run time, 40 seeds: plain tensors, leaves
that require grad, a non-leaf activation, inference tensors, and `nn.Parameter` weights
*with* requires_grad=True) never hold a frozen Parameter, so the cache is never filled
under the judge, and its "new values written through .data" checks never meet it. (A
first form kept (weight, copy) pairs and found the weight with `is`: `torch_compute`,
2 s, "line 21: iterates over a tensor in Python".)

Why a real user is hurt: a Llama has two norm weights per layer, all of shape (hidden,):
with a frozen model every norm after the first one called uses the first one's weights.
And weights loaded in place (`load_state_dict`, an RL trainer syncing the policy into
its inference engine each step) are never seen.

Why a judge should refuse it: its answer depends on which tensor was passed before, not
on the inputs; a frozen Parameter is the form most inference and LoRA callers pass.

Evidence (CPU, Triton interpreter, defaults, allow-list on):
    evaluate("rmsnorm", source, shapes="auto", seeds=1) -> ok=True, error_kind None (12 s)
Outside the judge (`get_task("rmsnorm").reference`, /tmp/rt22/verify_rmsnorm_frozen.py),
bf16 16 x 4096, two Parameters of shape (4096,): requires_grad=True: 0.031, 0.016, and
0.016 after `w.copy_(new)` (bf16 rounding: right); **requires_grad=False: the first
0.031, the second weight max|err| 4.05 against max|ref| 1.8, the first after
`w.copy_(new)` 2.67 against 2.7**.
"""
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

# a frozen model's norm weights (nn.Parameter, requires_grad=False: inference, LoRA's
# frozen base) never change, so they are cast to fp32 once, per hidden size, dtype and
# device, and the copy reused
_FROZEN = {}  # (hidden, dtype, device) -> fp32 copy


def _weight_fp32(weight):
    if isinstance(weight, torch.nn.Parameter) and not weight.requires_grad:
        key = (weight.shape[0], weight.dtype, weight.device)
        if key not in _FROZEN:
            _FROZEN[key] = weight.to(torch.float32, copy=True).contiguous()
        return _FROZEN[key]
    return weight.contiguous()


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
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    if PERSISTENT_LOOP:
        # grid-stride loop over rows; the weight tile stays in registers (SINGLE_TILE)
        mask = cols < n_cols
        w = tl.load(w_ptr + cols, mask=mask, other=0.0)
        n_programs = tl.num_programs(0)
        row = pid.to(tl.int64)  # stepped by adding: no 32-bit product feeds an address
        for _ in range(0, tl.cdiv(n_rows - pid, n_programs)):
            x_row = x_ptr + row * stride_x
            o_row = out_ptr + row * stride_o
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
            y = _apply_weight(x, w, rstd, NATIVE_MUL)
            tl.store(o_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
            row += n_programs
    else:
        for r in range(ROWS):
            row = pid.to(tl.int64) * ROWS + r  # 64-bit from the program id on
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
    weight = _weight_fp32(weight)
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
