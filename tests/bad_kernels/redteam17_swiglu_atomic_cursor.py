"""Red team 17 (swiglu): a persistent flat kernel whose programs claim BLOCK-element chunks
from an int32 work cursor (`tl.atomic_add`), one launch (and cursor) per 65,536 tokens.

Class: addresses from 32-bit arithmetic done in memory (docs/evaluator.md,
`narrow_addresses`). The chunk's start is the old value of an int32 atomic add of BLOCK:
the k-th claim is `k * BLOCK`, summed by the atomic unit in 32 bits. The TTIR holds a
`tt.atomic_rmw` result plus `tl.arange`: no product, no cast, no `scf.for` argument (the
claim loop is a `while`), and 32-bit arithmetic on the atomic's result passes (the docs
say the same on a loaded value is refused). The laps: every listed shape, the drawn one
and the wide shape (74,944 x 28,672) hold under 2**31 elements per 65,536-token launch.

Wrong for a user: an MLP with a wide intermediate size over a long prefill, e.g.
Llama 3 405B's (ffn 53,248) over a 65,536-token chunk: the cursor passes 2**31 after
40,330 tokens and wraps negative; the last 25,206 tokens are read from and written to
before the buffers.
"""
import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 4
PROGRAMS = 132  # persistent grid (about an H100's SMs)
LAUNCH_ROWS = 65536  # tokens a launch; each launch has its own cursor


@triton.jit
def swiglu_queue_kernel(out_ptr, g_ptr, u_ptr, cursor_ptr, n_elements, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    start = tl.atomic_add(cursor_ptr, BLOCK)
    while start < n_elements:
        offs = start + cols
        mask = offs < n_elements
        g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = g / (1.0 + tl.exp(-g)) * u
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)
        start = tl.atomic_add(cursor_ptr, BLOCK)


def run(gate, up):
    if gate.shape != up.shape:
        raise ValueError(f"gate {tuple(gate.shape)} and up {tuple(up.shape)} differ")
    lead = gate.shape[:-1]
    n_cols = gate.shape[-1]
    gate = gate.reshape(-1, n_cols).contiguous()
    up = up.reshape(-1, n_cols).contiguous()
    out = torch.empty_like(gate)
    n_rows = gate.shape[0]
    if n_rows == 0 or n_cols == 0:
        return out.view(*lead, n_cols)
    n_launches = triton.cdiv(n_rows, LAUNCH_ROWS)
    cursors = torch.zeros(n_launches, dtype=torch.int32, device=gate.device)
    for i in range(n_launches):
        r0 = i * LAUNCH_ROWS
        r1 = min(n_rows, r0 + LAUNCH_ROWS)
        n_el = (r1 - r0) * n_cols
        grid = (max(1, min(PROGRAMS, triton.cdiv(n_el, BLOCK_SIZE))),)
        swiglu_queue_kernel[grid](out[r0:r1], gate[r0:r1], up[r0:r1], cursors[i:], n_el,
                                  BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)
    return out.view(*lead, n_cols)
