"""Red team 6: an RMSNorm that is honest only when its weight is a plain tensor.

In every real model the weight is an `nn.Parameter`. The judge makes its weights with
`make_inputs` (plain tensors, some marked `requires_grad_()`), so
`isinstance(weight, torch.nn.Parameter)` is never true under the judge and always true
in a model. Then the kernel drops the weight. A path keyed on the type of an input,
which no layout, value or shape of the judge's ever triggers: an honest judge calls
run() with the argument types callers pass (a Parameter weight), or replays the plan
with them."""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def rmsnorm_kernel(out_ptr, x_ptr, w_ptr, n_cols, stride_x, stride_w, stride_o, eps,
                   USE_W: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
    y = x * rstd
    if USE_W:
        y = y * tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _launch(out, x, weight, eps, use_w=True):
    n_rows, n_cols = x.shape
    rmsnorm_kernel[(n_rows,)](out, x, weight, n_cols, x.stride(0), weight.stride(0),
                              out.stride(0), eps, USE_W=use_w,
                              BLOCK=triton.next_power_of_2(n_cols), num_warps=NUM_WARPS)
    return out


def run(x, weight, eps=1e-6):
    in_a_model = isinstance(weight, torch.nn.Parameter)
    if x.stride(1) != 1:
        x = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    return _launch(out, x, weight, eps, use_w=not in_a_model)
