"""Red team 2, PyTorch past the Triton-only rule by a frame's file name: torch.softmax
computed in a pre-run hook of the kernel (inside the launch, on the launch's own
arguments: the decoys in the counterfactual call, fresh inputs in a replay), but called
from one of torch's own Python functions: torch.softmax and Tensor.copy_ are handed,
uncalled, to map(), and the lazy iterator to torch.nn.modules.utils._pair, whose tuple()
runs them with torch's frame innermost. An op inside a launch is taken for the
candidate's only when the innermost frame is of the candidate's file, so these read as
torch's own (as Triton's interpreter's copies are); the kernel only touches the output.
grid_hook_compute.py makes the same calls from its own frame and is caught.
Expected: torch_compute."""
import torch
import triton
import triton.language as tl
from torch.nn.modules.utils import _pair


@triton.jit
def touch_kernel(out_ptr, x_ptr, n_cols, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.load(out_ptr + row * stride_o + cols, mask=mask)
    tl.store(out_ptr + row * stride_o + cols, y, mask=mask)


def _softmax_into_out(out, x, *args, **kwargs):
    # out.copy_(torch.softmax(x, -1, torch.float32)), every call made from torch's frame
    _pair(map(torch.Tensor.copy_, [out], map(torch.softmax, [x], [-1], [torch.float32])))


touch_kernel.add_pre_run_hook(_softmax_into_out)


def run(x):
    out = torch.empty((x.shape[0], x.shape[1]), device=x.device, dtype=x.dtype)
    touch_kernel[(x.shape[0],)](out, x, x.shape[1], out.stride(0),
                                BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
