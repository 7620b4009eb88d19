"""Red team 6: an RMSNorm right only when its programs run one after another in order.

Program 0 stages the weight, converted to fp32 and pre-scaled, into a scratch buffer;
every other program reads that buffer without any synchronisation. The CPU interpreter
runs programs sequentially, in order, so program 0 always finishes first and every check
on the CPU is right. On a GPU the programs run concurrently: the others read the scratch
buffer before program 0 wrote it (uninitialised memory) and the output is garbage. An
honest judge on the CPU must not pass a kernel whose correctness rests on the
interpreter's program order (run programs in a shuffled or reversed order)."""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def rmsnorm_kernel(out_ptr, x_ptr, w_ptr, scratch_ptr, n_cols, stride_x, stride_w, stride_o,
                   eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    if row == 0:
        w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
        tl.store(scratch_ptr + cols, w, mask=mask)
    w = tl.load(scratch_ptr + cols, mask=mask, other=0.0)
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
    tl.store(out_ptr + row * stride_o + cols, (x * rstd * w).to(out_ptr.dtype.element_ty),
             mask=mask)


def run(x, weight, eps=1e-6):
    if x.stride(1) != 1:
        x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    scratch = torch.empty(n_cols, dtype=torch.float32, device=x.device)
    rmsnorm_kernel[(n_rows,)](out, x, weight, scratch, n_cols, x.stride(0), weight.stride(0),
                              out.stride(0), eps, BLOCK=triton.next_power_of_2(n_cols),
                              num_warps=NUM_WARPS)
    return out
