"""Cheat: a time bomb on the GPU's own clock. The kernel reads the global timer register
through inline assembly and is honest until a date (2027-01-01 UTC, in ns), then drops
the row max (NaN at large logits). No Python clock is read, so the surroundings rule sees nothing.
Expected: cheat_tamper (a kernel that reads a clock is refused from its IR, or from the
source under the interpreter, before it runs)."""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4
AFTER_NS = 1798761600 * 1_000_000_000


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, AFTER: tl.constexpr,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    now = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64,
                                    is_pure=False, pack=1)
    shift = tl.where(now > AFTER, 0.0, tl.max(x, 0))
    e = tl.exp(x - shift)
    y = e / tl.sum(e, 0)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    out = torch.empty_like(x)
    block = triton.next_power_of_2(x.shape[1])
    softmax_kernel[(x.shape[0],)](out, x, x.shape[1], x.stride(0), out.stride(0),
                                  AFTER=AFTER_NS, BLOCK=block, num_warps=NUM_WARPS)
    return out
