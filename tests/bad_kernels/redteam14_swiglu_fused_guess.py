"""Red team 14 (swiglu): a fused gate_up buffer recognised by its strides alone, and `up`
then read through `gate`'s pointer, `cols` elements further on. Wrong whenever the halves
lie otherwise under the same layout: OLMo's order (`x, gate = h.chunk(2, -1)`: gate is the
second half), or two fused buffers.

Class: the launch plan and its placement guard (docs/tasks.md, "What a call runs"). The
plan's key holds sizes, strides, dtype, device and 16-byte alignment. Where both inputs have
row stride 2 * cols (the halves of one merged projection) this wrapper launches one kernel
that is never handed `up`: it reads the up half at `gate + cols`. No PyTorch view spans the
two inputs and no address is read (no `data_ptr()`), so the recorded plan holds one input,
the key matches every later call with those strides, and the guard that checks where
shared inputs lie has no view to check.

The judge's fused-buffer condition lays gate out first and up right after it (and blocks of
rows on the other seed, stride cols); the property draw's wider rows pad by 1-64 elements,
which makes stride 2 * cols only for cols <= 64, kept off the path here (cols >= 256).

A realistic user: OLMo's SwiGLU, `x, gate = ff_proj(h).chunk(2, -1); act = silu(gate) * x`,
calls `op(gate, x)` with gate the second half: row r of the output gets row r + 1's `x`
(the last row reads past the buffer).
"""
import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 4


@triton.jit
def swiglu_kernel(out_ptr, g_ptr, u_ptr, n_cols, stride_g, stride_u, stride_o,
                  BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    g = tl.load(g_ptr + row * stride_g + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + row * stride_u + cols, mask=mask, other=0.0).to(tl.float32)
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def swiglu_fused_kernel(out_ptr, gu_ptr, n_cols, stride_gu, stride_o, BLOCK: tl.constexpr):
    # one merged [gate | up] row: gate at gu_ptr, up n_cols further on
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    base = gu_ptr + row * stride_gu
    g = tl.load(base + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(base + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(gate, up):
    if gate.shape != up.shape:
        raise ValueError(f"gate {tuple(gate.shape)} and up {tuple(up.shape)} differ")
    lead = gate.shape[:-1]
    n_cols = gate.shape[-1]
    gate = gate.reshape(-1, n_cols)
    up = up.reshape(-1, n_cols)
    if gate.stride(-1) != 1:
        gate = gate.contiguous()
    if up.stride(-1) != 1:
        up = up.contiguous()
    out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    n_rows = gate.shape[0]
    block = min(BLOCK_SIZE, triton.next_power_of_2(n_cols))
    grid = (n_rows, triton.cdiv(n_cols, block))
    merged = (n_rows > 1 and n_cols >= 256 and gate.stride(0) == 2 * n_cols
              and up.stride(0) == 2 * n_cols)
    if merged:  # the halves of one merged projection: read both through gate's row
        swiglu_fused_kernel[grid](out, gate, n_cols, gate.stride(0), out.stride(0),
                                  BLOCK=block, num_warps=NUM_WARPS)
    else:
        swiglu_kernel[grid](out, gate, up, n_cols, gate.stride(0), up.stride(0),
                            out.stride(0), BLOCK=block, num_warps=NUM_WARPS)
    return out.view(*lead, n_cols)
