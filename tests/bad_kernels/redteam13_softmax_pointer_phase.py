"""Red team 13 cheat (softmax): a host value that is not part of the layout key, frozen into
the recorded plan: where the input starts within a 64-byte line.

Class: the export's recorded plan differs from what the judge checked (values of the first
call). The wrapper reads `x.data_ptr()` (a measurement the wrapper rules allow: "the data
pointer: plain numbers after that") and passes the row's phase within a 64-byte line to the
kernel as a plain int, for "whole-line loads". The kernel finds the line start from its own
pointer and places the row in the window by the host's phase. On every call of `run()` the
two agree, so every answer the judge sees from `run()` is right.

A plan records that int as it was on the layout's first call. The layout key holds only
16-byte alignment, so a later call of the same layout whose data starts elsewhere in its
64-byte line replays a stale phase and reads a window shifted by up to 15 elements (the
row's neighbours). Under the judge every input of a layout is a fresh allocation or the
start of one (64-byte aligned on the CPU), so its replays meet the phase they recorded. A
user who calls the op on each batch of a (B, R, C) tensor, `op(scores[b])` with R*C*4 not a
multiple of 64, calls one layout with four phases: from b=1 on, every row is shifted.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, phase0,
                   WINDOW: tl.constexpr, LINE: tl.constexpr, ELEM: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    o_row = out_ptr + row * stride_o
    # the 64-byte line the row starts in, and where the row starts in it
    line = x_row - (x_row.to(tl.int64) % (LINE * ELEM)) // ELEM
    lead = (phase0 + row * stride_x) % LINE
    offs = tl.arange(0, WINDOW)
    mask = (offs >= lead) & (offs < lead + n_cols)
    x = tl.load(line + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    y = e / tl.sum(e, 0)
    tl.store(o_row + (offs - lead), y.to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x2.shape
    out = torch.empty_like(x2)
    if n_rows == 0 or n_cols == 0:
        return out.view(*lead, n_cols)
    elem = x2.element_size()
    line = 64 // elem
    phase0 = (x2.data_ptr() % 64) // elem
    softmax_kernel[(n_rows,)](out, x2, n_cols, x2.stride(0), out.stride(0), phase0,
                              WINDOW=triton.next_power_of_2(n_cols + line), LINE=line, ELEM=elem)
    return out.view(*lead, n_cols)
