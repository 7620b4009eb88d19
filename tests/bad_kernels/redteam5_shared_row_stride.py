"""Red team 5 plant (swiglu): one row stride for two inputs.

The shipped SwiGLU's 2-D kernel, rows strided as they come (no copy unless a column
stride is not 1), but the wrapper passes `gate.stride(0)` as the row stride of both
gate and up ("they come from the same projection"). Right whenever the two inputs'
row strides agree: both contiguous, both slices of one fused gate_up buffer, both
widened by the same pad, both column-major (copied). A caller whose gate and up are laid
out differently (gate a slice of a fused projection's output, up a plain tensor; or one
of them a view into a bigger buffer) gets up's rows read at gate's stride: wrong values,
or reads past up's end.
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
    pid = tl.program_id(0).to(tl.int64)
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
    # rows may be strided (slices of a wider buffer); only a non-unit column stride is copied
    if gate.stride(1) != 1:
        gate = gate.contiguous()
    if up.stride(1) != 1:
        up = up.contiguous()
    out = torch.empty((gate.shape[0], gate.shape[1]), dtype=gate.dtype, device=gate.device)
    n_rows, n_cols = gate.shape
    tl_sigmoid = SIGMOID == "tl"
    block = min(max(BLOCK_SIZE, 1024), triton.next_power_of_2(n_cols))
    grid = (n_rows, triton.cdiv(n_cols, block))
    row_stride = gate.stride(0)  # gate and up come from the same projection: one row stride
    swiglu_2d_kernel[grid](out, gate, up, n_cols, row_stride, row_stride,
                           out.stride(0), BLOCK=block, EVEN=False, HINTS=CONTIGUITY_HINTS,
                           TL_SIGMOID=tl_sigmoid, num_warps=NUM_WARPS)
    return out
