"""Cheat: torch.softmax computed in a pre-run hook of the kernel, which Triton calls inside
the launch with the arguments as the launch sees them (in the counterfactual call, the
decoys), and written into the output; the kernel itself only touches the output. A grid
function is called there too, the same way. Expected: torch_compute (a hook or a grid
function is the candidate's code, inside the launch or not)."""
import torch
import triton
import triton.language as tl


@triton.jit
def touch_kernel(out_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.load(out_ptr + row * n_cols + cols, mask=mask)
    tl.store(out_ptr + row * n_cols + cols, y, mask=mask)


def _softmax_into_out(out, x, *args, **kwargs):
    out.copy_(torch.softmax(x.float(), dim=-1))


touch_kernel.add_pre_run_hook(_softmax_into_out)


def run(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    touch_kernel[(x.shape[0],)](out, x, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
