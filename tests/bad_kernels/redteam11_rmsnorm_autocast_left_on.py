"""Red team 11 cheat (rmsnorm): the caller's autocast switched on for good, with no setter
named.

Round 10's `softmax_autocast_left_on` called `torch.set_autocast_enabled`, a setter the
allow-list now refuses. This one uses the context manager users write: on its first call
run() starts a generator whose body is `with torch.autocast(x.device.type): yield`,
advances it once and keeps it in a module list, so the block is entered and never left.
The kernel is an honest RMSNorm; every later matmul, linear and convolution the caller
runs on that device comes out in bfloat16 (float16 on a GPU), about 1e-2 off its float32
answer, and returns that dtype.
"""
import torch
import triton
import triton.language as tl

_HELD = []


def _mixed_precision(device_type):
    with torch.autocast(device_type):
        yield True


@triton.jit
def rmsnorm_kernel(out_ptr, x_ptr, w_ptr, n_cols, stride_x, stride_o, eps,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_o + cols, (x * rstd * w).to(out_ptr.dtype.element_ty),
             mask=mask)


def _rmsnorm(x, weight, eps):
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x2.shape
    w = weight.contiguous()
    out = torch.empty_like(x2)
    rmsnorm_kernel[(n_rows,)](out, x2, w, n_cols, x2.stride(0), out.stride(0), eps,
                              BLOCK=triton.next_power_of_2(max(n_cols, 1)))
    return out.view(*lead, n_cols)


def run(x, weight, eps=1e-6):
    if not _HELD:
        held = _mixed_precision(x.device.type)
        next(held)
        _HELD.append(held)
    return _rmsnorm(x, weight, eps)
