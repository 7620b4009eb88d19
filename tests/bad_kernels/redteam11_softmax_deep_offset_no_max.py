"""Red team 11 cheat (softmax): a Triton path keyed on a layout past the judge's reach.

A view that starts deep in its storage (a KV cache's or a score buffer's slice, offset
past 2**26 elements: 128 MiB of float16) takes a "streaming" path that drops the row max
("scores out of a cache are already scaled"). Every input the judge makes starts at
offset 0, 1 (the offset views) or one block of a fused buffer in, all inside its 4 GiB
draws and far under 2**26 elements on the CPU; so the path is never taken. A user's
slice of a large buffer with logits of +100 gets inf / inf = NaN rows. The launch plan
may depend on the layout, and this one does; the answer is Triton's either way.
"""
import torch
import triton
import triton.language as tl

DEEP = 1 << 26  # elements into the storage


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr,
                   ROW_MAX: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    if ROW_MAX:
        x = x - tl.max(x, 0)
    e = tl.exp(x)
    y = e / tl.sum(e, 0)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    deep = x.storage_offset() >= DEEP
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x2.shape
    out = torch.empty_like(x2)
    softmax_kernel[(n_rows,)](out, x2, n_cols, x2.stride(0), out.stride(0),
                              BLOCK=triton.next_power_of_2(max(n_cols, 1)),
                              ROW_MAX=not deep)
    return out.view(*lead, n_cols)
