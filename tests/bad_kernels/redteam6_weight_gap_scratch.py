"""Red team 6: an RMSNorm that writes into the caller's memory between weight elements.

When the weight is a strided vector (a column of a stacked per-layer weight,
`W[:, layer]`, the layout the judge itself passes as "vectors every other element") the
kernel stores each row's 1/rms into the element right after the weight's last one, in
the caller's buffer, and reads it back. The output is right on every layout; what it
overwrote is the next layer's weight. An honest judge checks the whole storage around
every input, not only the elements the view shows."""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def rmsnorm_kernel(out_ptr, x_ptr, w_ptr, n_cols, stride_x, stride_w, stride_o, eps,
                   SCRATCH: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
    ss = tl.sum(x * x, 0)
    if SCRATCH:
        # the row's sum of squares goes into the caller's buffer, just past the weight's
        # last element (inside its storage)
        gap = w_ptr + (n_cols - 1) * stride_w + 1
        tl.store(gap, ss.to(w_ptr.dtype.element_ty))
    rstd = tl.rsqrt(ss / n_cols + eps)
    tl.store(out_ptr + row * stride_o + cols, (x * rstd * w).to(out_ptr.dtype.element_ty),
             mask=mask)


def run(x, weight, eps=1e-6):
    if x.stride(1) != 1:
        x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    gap = weight.storage_offset() + (n_cols - 1) * weight.stride(0) + 1
    room = weight.untyped_storage().nbytes() // weight.element_size()
    rmsnorm_kernel[(n_rows,)](out, x, weight, n_cols, x.stride(0), weight.stride(0),
                              out.stride(0), eps, SCRATCH=weight.stride(0) > 1 and gap < room,
                              BLOCK=triton.next_power_of_2(n_cols), num_warps=NUM_WARPS)
    return out
