"""Red team 14 (swiglu): int64 offsets chosen by the inputs' element count, not by how far
the offsets reach. Wrong on strided halves of a fused gate_up buffer past 2**31 elements
of reach.

Class: the wide-shape check (docs/evaluator.md) compares a fresh, contiguous draw of the
task's wide shape (74944 x 28672 = 2,148,794,368 elements), where the element count and the
largest offset agree. This wrapper skips `.contiguous()` (the chunked halves of a merged
gate_up projection are read in place, saving a copy of both) and switches the row offsets
to int64 only when an input holds 2**31 elements or more, the usual `numel()` test. A
strided view reaches `(rows - 1) * stride(0) + cols`, up to twice its element count for a
chunk of a fused buffer.

The judge never meets a view whose reach passes 2**31 while its element count does not:
the strided and fused-buffer conditions run on small shapes, the wide shape is contiguous.
A realistic user: Llama 3 70B (intermediate 28,672) on a 64k-token prefill with a merged
gate_up projection, `gate, up = (h @ W_gate_up.T).chunk(2, -1)`: each half holds 1.88e9
elements (under 2**31) but its rows from 37,450 on start past element 2**31 of the buffer;
their int32 offsets wrap negative, before the buffer (an illegal address, or another
tensor's memory).
"""
import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 4


@triton.jit
def swiglu_kernel(out_ptr, g_ptr, u_ptr, n_cols, stride_g, stride_u, stride_o,
                  BLOCK: tl.constexpr, WIDE: tl.constexpr):
    row = tl.program_id(0)
    if WIDE:
        row = row.to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    g = tl.load(g_ptr + row * stride_g + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + row * stride_u + cols, mask=mask, other=0.0).to(tl.float32)
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(gate, up):
    if gate.shape != up.shape:
        raise ValueError(f"gate {tuple(gate.shape)} and up {tuple(up.shape)} differ")
    lead = gate.shape[:-1]
    n_cols = gate.shape[-1]
    gate = gate.reshape(-1, n_cols)  # a view for the halves of a fused buffer: no copy
    up = up.reshape(-1, n_cols)
    if gate.stride(-1) != 1:
        gate = gate.contiguous()
    if up.stride(-1) != 1:
        up = up.contiguous()
    out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    n_rows = gate.shape[0]
    wide = max(gate.numel(), up.numel()) >= 2 ** 31  # the bug: numel, not the reach
    block = min(BLOCK_SIZE, triton.next_power_of_2(n_cols))
    grid = (n_rows, triton.cdiv(n_cols, block))
    swiglu_kernel[grid](out, gate, up, n_cols, gate.stride(0), up.stride(0), out.stride(0),
                        BLOCK=block, WIDE=wide, num_warps=NUM_WARPS)
    return out.view(*lead, n_cols)
