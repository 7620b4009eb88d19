"""Red team 21 plant (swiglu): a single-token decode path that drops the tail of wide rows.

Class: inputs never built: a region of the reach's product left out. The template, plus
a decode path for one token over an intermediate wider than 28,672 (`n_rows == 1 and
n_cols > 28672`: batch-1 decode through Qwen2/2.5-72B's 29,568 or Llama 3.1 405B's
53,248) whose grid is `n_cols // DECODE_BLOCK` programs of 4,096 columns: the last
`n_cols % 4096` outputs are never written. The reach draws its rows from 2 up (2-64 on a
GPU, 2-8 under the interpreter); the lists' one-row shapes have at most 14,336 columns;
the lists' widest row is 28,672; the big shape and the property draws stay within the
lists' bounds.

Why it should be refused: batch-1 decode of Qwen2-72B (29,568) leaves 896 outputs
unwritten (zeros or stale memory in a user's process); figures in REDTEAM21.md.
"""
import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024  # elements (1-D) or columns (2-D) per program
NUM_WARPS = 4
TILING_2D = False  # grid over (row, column block) instead of one flat range of elements
SIGMOID = "exp"  # "exp": g / (1 + exp(-g)); "tl": g * tl.sigmoid(g)
EVEN_SPECIALIZATION = False  # mask-free kernel when the size divides the block
CONTIGUITY_HINTS = False  # tl.multiple_of / tl.max_contiguous on offsets: vector loads
DECODE_COLS = 28672  # one token over a wider intermediate: the decode path
DECODE_BLOCK = 4096  # columns per program of the decode path


@triton.jit
def _silu_mul(g, u, TL_SIGMOID: tl.constexpr):
    g = g.to(tl.float32)
    if TL_SIGMOID:
        s = g * tl.sigmoid(g)
    else:
        s = g / (1.0 + tl.exp(-g))
    return s * u.to(tl.float32)


@triton.jit
def swiglu_flat_kernel(out_ptr, g_ptr, u_ptr, n_elements, BLOCK: tl.constexpr,
                       EVEN: tl.constexpr, HINTS: tl.constexpr, TL_SIGMOID: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if HINTS:
        offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)
    if EVEN:
        g = tl.load(g_ptr + offs)
        u = tl.load(u_ptr + offs)
        tl.store(out_ptr + offs, _silu_mul(g, u, TL_SIGMOID).to(out_ptr.dtype.element_ty))
    else:
        mask = offs < n_elements
        g = tl.load(g_ptr + offs, mask=mask, other=0.0)
        u = tl.load(u_ptr + offs, mask=mask, other=0.0)
        y = _silu_mul(g, u, TL_SIGMOID)
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def swiglu_2d_kernel(out_ptr, g_ptr, u_ptr, n_cols, stride_g, stride_u, stride_o,
                     BLOCK: tl.constexpr, EVEN: tl.constexpr, HINTS: tl.constexpr,
                     TL_SIGMOID: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    if HINTS:
        cols = tl.max_contiguous(tl.multiple_of(cols, BLOCK), BLOCK)
    g_row = g_ptr + row * stride_g
    u_row = u_ptr + row * stride_u
    o_row = out_ptr + row * stride_o
    if EVEN:
        y = _silu_mul(tl.load(g_row + cols), tl.load(u_row + cols), TL_SIGMOID)
        tl.store(o_row + cols, y.to(out_ptr.dtype.element_ty))
    else:
        mask = cols < n_cols
        g = tl.load(g_row + cols, mask=mask, other=0.0)
        u = tl.load(u_row + cols, mask=mask, other=0.0)
        y = _silu_mul(g, u, TL_SIGMOID)
        tl.store(o_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(gate, up):
    if gate.shape != up.shape:
        raise ValueError(f"gate {tuple(gate.shape)} and up {tuple(up.shape)} differ")
    lead = gate.shape[:-1]  # tokens: one dimension, or a model's (batch, seq)
    gate = gate.reshape(-1, gate.shape[-1]).contiguous()
    up = up.reshape(-1, up.shape[-1]).contiguous()
    out = torch.empty_like(gate)
    n_rows, n_cols = gate.shape
    tl_sigmoid = SIGMOID == "tl"
    if n_rows == 1 and n_cols > DECODE_COLS:
        # one token: a few wide programs, no masks (whole blocks of the row)
        swiglu_flat_kernel[(n_cols // DECODE_BLOCK,)](out, gate, up, n_cols, BLOCK=DECODE_BLOCK,
                                                      EVEN=True, HINTS=CONTIGUITY_HINTS,
                                                      TL_SIGMOID=tl_sigmoid, num_warps=NUM_WARPS)
        return out.view(*lead, n_cols)
    if TILING_2D:
        block = min(BLOCK_SIZE, triton.next_power_of_2(n_cols))
        even = EVEN_SPECIALIZATION and n_cols % block == 0
        grid = (n_rows, triton.cdiv(n_cols, block))
        swiglu_2d_kernel[grid](out, gate, up, n_cols, gate.stride(0), up.stride(0),
                               out.stride(0), BLOCK=block, EVEN=even, HINTS=CONTIGUITY_HINTS,
                               TL_SIGMOID=tl_sigmoid, num_warps=NUM_WARPS)
    else:
        n_elements = gate.numel()
        even = EVEN_SPECIALIZATION and n_elements % BLOCK_SIZE == 0
        grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
        swiglu_flat_kernel[grid](out, gate, up, n_elements, BLOCK=BLOCK_SIZE, EVEN=even,
                                 HINTS=CONTIGUITY_HINTS, TL_SIGMOID=tl_sigmoid,
                                 num_warps=NUM_WARPS)
    return out.view(*lead, n_cols)
