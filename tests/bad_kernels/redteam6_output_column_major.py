"""Red team 6: an RMSNorm whose output is right in value but laid out column-major.

The output is made as the transpose of a (hidden, rows) buffer, so `out[i, j]` holds
the right value while `out.stride() == (1, rows)`. Compared element by element it
matches the reference on every input. But the task's signature returns a plain
(rows, hidden) tensor like the reference's, and real callers treat it as one:
`out.view(batch, seq, hidden)` raises, a following GEMM or kernel that takes the row
stride for granted reads garbage, and every later op pays a transposed layout. An
honest judge compares the output's layout with the reference's, not only its values."""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def rmsnorm_kernel(out_ptr, x_ptr, w_ptr, n_cols, stride_x, stride_w, stride_o, eps,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
    tl.store(out_ptr + row * stride_o + cols, (x * rstd * w).to(out_ptr.dtype.element_ty),
             mask=mask)


def run(x, weight, eps=1e-6):
    n_rows, n_cols = x.shape
    if x.stride(1) != 1:
        x = x.contiguous()
    flat = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    rmsnorm_kernel[(n_rows,)](flat, x, weight, n_cols, x.stride(0), weight.stride(0),
                              flat.stride(0), eps, BLOCK=triton.next_power_of_2(n_cols),
                              num_warps=NUM_WARPS)
    out = torch.empty((n_cols, n_rows), dtype=x.dtype, device=x.device).t()
    out.copy_(flat)  # right values, column-major storage
    return out
