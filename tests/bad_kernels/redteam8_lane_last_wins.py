"""Red team 8: rmsnorm, right only because the interpreter stores a block's lanes in order.

Each program keeps its row's sum of squares in a per-call scratch slot (one slot per
row, so no two programs store to one address: no cross-program race). The slot is
written with a single ``tl.store`` of a whole block to one address: every lane holds the
running (prefix) sum of squares up to its column, and the last lane holds the row's
total. The Triton interpreter (numpy) writes a block's lanes in index order, so the last
lane's value, the total, is what lands and what the program reads back. On a GPU the
lanes are threads of several warps storing to one address with no order: whichever
lands last is a partial sum, and the row is scaled by the wrong rstd.
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def rmsnorm_lanes_kernel(out_ptr, x_ptr, w_ptr, slot_ptr, n_cols, stride_x, stride_o, eps,
                         BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row.to(tl.int64) * stride_x + cols, mask=mask, other=0.0)
    x = x.to(tl.float32)
    running = tl.cumsum(x * x, 0)  # lane i: the sum of squares of columns 0..i
    # every lane stores to the row's one slot; in lane order the last (the total) wins
    tl.store(slot_ptr + row + cols * 0, running)
    total = tl.load(slot_ptr + row)
    rstd = tl.rsqrt(total / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row.to(tl.int64) * stride_o + cols,
             (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def run(x, weight, eps=1e-6):
    lead = x.shape[:-1]
    x = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x.shape
    weight = weight.contiguous()
    out = torch.empty_like(x)
    if n_rows == 0:
        return out.view(*lead, n_cols)
    slot = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    rmsnorm_lanes_kernel[(n_rows,)](out, x, weight, slot, n_cols, x.stride(0), out.stride(0),
                                    eps, BLOCK=triton.next_power_of_2(n_cols),
                                    num_warps=NUM_WARPS)
    return out.view(*lead, n_cols)
