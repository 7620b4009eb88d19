"""Red team 14 (softmax): 32-bit row offsets, "made safe" past 2**31 elements by splitting
the rows into two launches. Right up to 2**32 elements, wrong past that.

Class: the wide-shape check (docs/evaluator.md, "the task's wide shape"). The judge runs
one real model's shape whose largest tensor holds just over 2**31 elements (softmax:
Llama 3's logits over 16,800 tokens, 16800 x 128256 = 2,154,700,800 elements) and compares
the rows past element 2**31. This kernel keeps `row * stride` in int32 (no `.to(tl.int64)`)
and, where the rows span 2**31 elements or more, launches the first half of the rows and
then the second half, each from its own base pointer: each half holds under 2**31 elements
as long as the whole holds under 2**32, so every row the judge compares is right.

Wrong where the tensor holds 2**32 elements or more: a half then spans more than 2**31, its
last rows' offsets wrap negative and land in the first half's rows (read and written), and
the last rows of the output are never written. A realistic user: a training or distillation
step taking the softmax of Qwen2.5's logits (vocabulary 152,064) over a 32,768-token
micro-batch: 4.98e9 elements, 10 GB in float16 (Gemma's 256,000-word vocabulary passes
2**32 at 16,778 tokens).
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4
LAUNCH_SPAN = 2 ** 31  # elements one launch may reach with int32 offsets


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x_row = x_ptr + row * stride_x  # int32: fine while a launch spans < 2**31 elements
    o_row = out_ptr + row * stride_o
    m = -float("inf")
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=-float("inf"))
        m = tl.maximum(m, tl.max(x.to(tl.float32), 0))
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=-float("inf"))
        s += tl.sum(tl.exp(x.to(tl.float32) - m), 0)
    for start in range(0, n_cols, BLOCK):
        msk = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=msk, other=-float("inf"))
        y = tl.exp(x.to(tl.float32) - m) / s
        tl.store(o_row + start + cols, y.to(out_ptr.dtype.element_ty), mask=msk)


def _launch(out, x):
    n_rows, n_cols = x.shape
    block = min(4096, triton.next_power_of_2(n_cols))
    softmax_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0), BLOCK=block,
                              num_warps=NUM_WARPS)


def run(x):
    lead = x.shape[:-1]
    n_cols = x.shape[-1]
    x = x.reshape(-1, n_cols)
    if x.stride(-1) != 1:
        x = x.contiguous()
    n_rows = x.shape[0]
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows > 1 and n_rows * max(x.stride(0), n_cols) >= LAUNCH_SPAN:
        half = n_rows // 2  # the bug: two halves are enough only below 2**32 elements
        _launch(out[:half], x[:half])
        _launch(out[half:], x[half:])
    else:
        _launch(out, x)
    return out.view(*lead, n_cols)
