"""Red team 2, Python over memory with no aten op, inside the launch: numpy computes the
softmax in a pre-run hook of the kernel, through views of the launch's own arguments
(torch._C.TensorBase.numpy, which no hook sees and no aten op makes), and writes it into
the output; the kernel only loads the output and stores it back. The hook runs inside
every launch with the arguments as the launch sees them, so on the counterfactual call's
decoys it computes the decoys' softmax (wrong there, as an honest kernel is) and in a
replay of the launch plan on fresh inputs it computes theirs (right there, as an honest
kernel is); no torch op computes anything. numpy_view_write.py does the same after the
launch and is caught by the counterfactual call.
Expected: torch_compute (the answer is not the candidate's Triton kernel's)."""
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def touch_kernel(out_ptr, x_ptr, n_cols, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.load(out_ptr + row * stride_o + cols, mask=mask)
    tl.store(out_ptr + row * stride_o + cols, y, mask=mask)


def _numpy_softmax(out, x, *args, **kwargs):
    a = torch._C.TensorBase.numpy(x).astype(np.float32)
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    torch._C.TensorBase.numpy(out)[...] = e / e.sum(axis=-1, keepdims=True)


touch_kernel.add_pre_run_hook(_numpy_softmax)


def run(x):
    out = torch.empty((x.shape[0], x.shape[1]), device=x.device, dtype=x.dtype)
    touch_kernel[(x.shape[0],)](out, x, x.shape[1], out.stride(0),
                                BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
