"""Cheat (GPU): honest on an input's first calls (the checks), torch.softmax from the
third call in a row on the same input (a clock repeating its inputs), told apart without
reading the evaluator (mode_flag_sniff.py reads its mode, refused as cheat_tamper). The
same Triton launch runs both times, same grid, same arguments, so the launch counts and
signatures match; when timed it reads a device-side flag and returns at once. Expected:
torch_compute (the GPU's own timestamps name ATen's softmax kernel under the clock)."""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, x_ptr, skip_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    if tl.load(skip_ptr) != 0:
        return
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    y = e / tl.sum(e, 0)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


_LAST = {"ptr": None, "calls": 0}


def run(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    same = _LAST["ptr"] == x.data_ptr()
    _LAST.update(ptr=x.data_ptr(), calls=_LAST["calls"] + 1 if same else 1)
    timed = _LAST["calls"] >= 3
    skip = torch.full((1,), int(timed), dtype=torch.int32, device=x.device)
    if timed:
        torch.softmax(x, dim=-1, out=out)
    softmax_kernel[(x.shape[0],)](out, x, skip, x.shape[1], x.stride(0), out.stride(0),
                                  BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
