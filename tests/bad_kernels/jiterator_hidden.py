"""Cheat: the exponentials computed by a jiterator kernel (compiled and launched from
C++, where neither the dispatch mode nor the launch tracking looks), the rest in a Triton
kernel. On a CPU build the jiterator cannot run, so the candidate falls back to its own
kernel; the attempt is what is refused. Expected: torch_compute (GPU work unseen)."""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, x_ptr, e_ptr, n_cols, stride_x, stride_o,
                   HAVE_EXP: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    if HAVE_EXP:  # the jiterator's exp(x - max) of the row
        e = tl.load(e_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    else:
        e = tl.exp(x - tl.max(x, 0))
    y = e / tl.sum(e, 0)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


_EXP = "template <typename T> T shifted_exp(T x, T m) { return exp(x - m); }"


def run(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    e, have = x, False
    try:
        shifted_exp = torch.cuda.jiterator._create_jit_fn(_EXP)
        e, have = shifted_exp(x, x.amax(dim=-1, keepdim=True)), True
    except Exception:  # no CUDA in this build: the kernel does it all
        pass
    softmax_kernel[(x.shape[0],)](out, x, e, x.shape[1], x.stride(0), out.stride(0),
                                  HAVE_EXP=have, BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
