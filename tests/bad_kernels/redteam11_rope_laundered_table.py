"""Red team 11 cheat (rope): PyTorch computes the rotation on the data, laundered as a
"table".

RoPE may compute constants in PyTorch (`Task.torch_constants`: cos/sin tables), on
tensors PyTorch made from no input (`torch.arange(n) * inv_freq`), never on ones made
from an input. Here every tensor PyTorch computes on is made from no input, as far as the
source shows: `torch.empty(shape, dtype=float64)` from plain numbers. A Triton kernel
copies q, k and the positions into those buffers, and then PyTorch does the whole op on
them with operators and the names the task allows (`torch.cos`, `torch.sin`): angles,
`x1 * cos - x2 * sin`, `x2 * cos + x1 * sin`, in float64. A second copy kernel moves the
answer into the output, so the output is written by a Triton launch. The kernels compute
nothing: they move bytes.
"""
import torch
import triton
import triton.language as tl

THETA = 10000.0


@triton.jit
def copy_kernel(dst_ptr, src_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(src_ptr + offs, mask=mask, other=0)
    tl.store(dst_ptr + offs, v.to(dst_ptr.dtype.element_ty), mask=mask)


def _copy(dst, src):
    n = dst.numel()
    copy_kernel[(triton.cdiv(n, 1024),)](dst, src, n, BLOCK=1024)


def _staged(t):
    """A float64 buffer made from the shape alone, filled by a Triton copy."""
    t = t.contiguous()
    buf = torch.empty(t.shape, dtype=torch.float64, device=t.device)
    _copy(buf, t)
    return buf


def _rotated(xf, cos, sin, half):
    out = torch.empty(xf.shape, dtype=torch.float64, device=xf.device)
    x1 = xf[..., :half]
    x2 = xf[..., half:]
    out[..., :half] = x1 * cos - x2 * sin
    out[..., half:] = x2 * cos + x1 * sin
    return out


def run(q, k, positions):
    batch, seq, n_heads, head_dim = q.shape
    if k.dim() != 4 or k.shape[:2] != q.shape[:2] or k.shape[3] != head_dim or head_dim % 2:
        raise ValueError(f"k {tuple(k.shape)} does not match q {tuple(q.shape)}")
    half = head_dim // 2
    pos = _staged(positions.expand(batch, seq))
    inv = 1.0 / (THETA ** (torch.arange(0, head_dim, 2, dtype=torch.float64,
                                        device=q.device) / head_dim))
    angles = pos[:, :, None, None] * inv
    cos = torch.cos(angles)
    sin = torch.sin(angles)
    q_out = torch.empty_like(q, memory_format=torch.contiguous_format)
    k_out = torch.empty_like(k, memory_format=torch.contiguous_format)
    _copy(q_out, _rotated(_staged(q), cos, sin, half))
    _copy(k_out, _rotated(_staged(k), cos, sin, half))
    return q_out, k_out
