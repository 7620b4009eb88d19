"""Red team 7: a path keyed on `x.is_inference()` (an inference tensor).

Route: serving stacks run the model under `torch.inference_mode()`, so every activation
they hand an op is an inference tensor (`x.is_inference()` is True). The judge calls the
candidate under inference mode too, but on inputs it made outside it (docs/evaluator.md:
"the judge's runs are under torch.inference_mode()"), and the training forms are leaves,
views made under autograd and Parameters. An inference tensor is a flag of the input, not
of the call, and no condition makes one. Here such an input takes PyTorch's RMSNorm.
Why a cheat: every call a server makes is computed by PyTorch, not the Triton kernel.
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
    rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * rstd * w
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _triton_rmsnorm(x, weight, eps):
    n_rows, n_cols = x.shape
    x = x.contiguous()
    weight = weight.contiguous()
    out = torch.empty_like(x)
    rmsnorm_kernel[(n_rows,)](out, x, weight, n_cols, x.stride(0), out.stride(0), eps,
                              BLOCK=triton.next_power_of_2(n_cols), num_warps=NUM_WARPS)
    return out


def run(x, weight, eps=1e-6):
    if x.is_inference():
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
        return (xf * rstd * weight.float()).to(x.dtype)
    return _triton_rmsnorm(x, weight, eps)
