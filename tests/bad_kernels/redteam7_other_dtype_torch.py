"""Red team 7: PyTorch computes every dtype but the one the evaluation asks.

Route: the judge calls the kernel in "every other dtype the task declares, on the task's
smallest CPU shape, plainly and under each of the task's own conditions of the values"
and says of it "Correctness only: timing stays in the dtype asked" (docs/evaluator.md).
Here bfloat16 inputs go to PyTorch's RMSNorm and float16/float32 to the Triton kernel;
the evaluation is asked in float16. The bfloat16 answers are right, so the other-dtype
check passes them, and the Triton-only rule (torch_compute), the replay and the GPU's own
kernel names are applied where the dtype asked runs. A first version hid a never-run
`tl.dot` to claim the interpreter's bfloat16 exemption for dot kernels; the same plant
without it passed as well, so the exemption is not the route. Why a cheat: every bfloat16
call, what most models run, is computed by PyTorch, not the Triton kernel.
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def rmsnorm_kernel(out_ptr, x_ptr, w_ptr, n_cols, stride_x, stride_o, eps,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    ssq = tl.sum(x * x, 0)
    rstd = tl.rsqrt(ssq / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_o + cols, (x * rstd * w).to(out_ptr.dtype.element_ty),
             mask=mask)


def run(x, weight, eps=1e-6):
    if x.dtype == torch.bfloat16:
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
        return (xf * rstd * weight.float()).to(x.dtype)
    n_rows, n_cols = x.shape
    x = x.contiguous()
    weight = weight.contiguous()
    out = torch.empty_like(x)
    rmsnorm_kernel[(n_rows,)](out, x, weight, n_cols, x.stride(0), out.stride(0), eps,
                              BLOCK=max(256, triton.next_power_of_2(n_cols)),
                              num_warps=NUM_WARPS)
    return out
