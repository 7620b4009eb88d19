"""Red team 15 (rope): q and k rotated in place of any layout (no `.contiguous()` copy):
the token's offset `b * stride_b + s * stride_s` in 64 bits, the heads of a program's
tile at `heads[:, None] * stride_h` in 32 bits (`tl.arange` is int32), as the rope
template's own `_rotate_heads` computes them. Wrong where one token's heads span 2**31
elements: q laid out heads-major, (batch, heads, seq, head_dim), and seen as
(batch, seq, heads, head_dim).

Class: rows far apart lays out a task's leading dimensions. RoPE declares none
(`leading_dims = ()`), and the heads are not rows: if the lap lays only the batch and the
sequence of q, k and positions 2**31 apart, a heads stride past 2**31 / heads is never
met; the wide shape is contiguous (heads stride = head_dim) and the checked strided
layouts pad rows by 16 or 1-64 elements.

Wrong for a user: a long-context prefill whose attention backend keeps q and k
heads-major ((B, H, S, D) contiguous, as `q_proj(x).view(B, S, H, D).transpose(1, 2)
.contiguous()` leaves them, or a ring-attention shard) and hands them to this op as
`q.transpose(1, 2)`: Qwen2.5-7B-Instruct-1M at 1,048,576 tokens, 28 heads of 128: the
heads stride is 134,217,728 elements, and head 16 on sits at 2**31 or more: its offset
wraps negative, so heads 16-27 of every token are read and written before q's buffer
(an illegal access, or another tensor's memory).
"""
import torch
import triton
import triton.language as tl

HEADS_PER_PROGRAM = 4  # heads rotated by one program (a [heads, head_dim/2] tile)
NUM_WARPS = 1

_THETA = 10000.0
_CACHE = {}  # (head_dim, device) -> inv_freq hi/lo, built once per process


@triton.jit
def _rotate(out_ptr, x_ptr, x_tok, o_tok, heads, n_heads, stride_h, stride_oh, half,
            freqs, fmask, cos, sin):
    mask = (heads[:, None] < n_heads) & fmask[None, :]
    x_offs = x_tok + heads[:, None] * stride_h + freqs[None, :]
    o_offs = o_tok + heads[:, None] * stride_oh + freqs[None, :]
    x1 = tl.load(x_ptr + x_offs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + x_offs + half, mask=mask, other=0.0).to(tl.float32)
    c = cos[None, :]
    s = sin[None, :]
    tl.store(out_ptr + o_offs, (x1 * c - x2 * s).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + o_offs + half, (x2 * c + x1 * s).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rope_kernel(out_ptr, x_ptr, pos_ptr, freq_hi_ptr, freq_lo_ptr, seq, n_heads, half,
                stride_b, stride_s, stride_h, stride_ob, stride_os, stride_oh,
                stride_pb, stride_ps,
                HEADS: tl.constexpr, BLOCK_D: tl.constexpr):
    token = tl.program_id(0)
    b = (token // seq).to(tl.int64)
    s = (token % seq).to(tl.int64)
    heads = tl.program_id(1) * HEADS + tl.arange(0, HEADS)
    pos = tl.load(pos_ptr + b * stride_pb + s * stride_ps)
    freqs = tl.arange(0, BLOCK_D)
    fmask = freqs < half
    hi = tl.load(freq_hi_ptr + freqs, mask=fmask, other=0.0)
    lo = tl.load(freq_lo_ptr + freqs, mask=fmask, other=0.0)
    p = pos.to(tl.float32)
    angle = p * hi
    err = tl.fma(p, hi, -angle) + p * lo
    turns = tl.floor(angle * 0.15915494309189535 + 0.5)
    r = tl.fma(-turns, 6.2831854820251465, angle)
    r = tl.fma(-turns, -1.7484555314695172e-07, r) + err
    cos = tl.cos(r)
    sin = tl.sin(r)
    _rotate(out_ptr, x_ptr, b * stride_b + s * stride_s, b * stride_ob + s * stride_os,
            heads, n_heads, stride_h, stride_oh, half, freqs, fmask, cos, sin)


def _inv_freq(head_dim, device):
    key = (head_dim, str(device))
    if key not in _CACHE:
        exponent = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
        inv = 1.0 / (_THETA ** exponent)
        hi = inv.float()
        lo = (inv - hi.double()).float()
        _CACHE[key] = (hi.to(device), lo.to(device))
    return _CACHE[key]


def _apply(x, positions, freq_hi, freq_lo):
    batch, seq, n_heads, head_dim = x.shape
    if x.stride(3) != 1:
        x = x.contiguous()
    out = torch.empty((batch, seq, n_heads, head_dim), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    half = head_dim // 2
    heads = min(HEADS_PER_PROGRAM, triton.next_power_of_2(n_heads))
    grid = (batch * seq, triton.cdiv(n_heads, heads))
    rope_kernel[grid](out, x, positions, freq_hi, freq_lo, seq, n_heads, half,
                      x.stride(0), x.stride(1), x.stride(2),
                      out.stride(0), out.stride(1), out.stride(2),
                      positions.stride(0), positions.stride(1),
                      HEADS=heads, BLOCK_D=triton.next_power_of_2(max(half, 1)),
                      num_warps=NUM_WARPS)
    return out


def run(q, k, positions):
    batch, seq, n_q_heads, head_dim = q.shape
    if k.dim() != 4 or k.shape[:2] != q.shape[:2] or k.shape[3] != head_dim:
        raise ValueError(f"k {tuple(k.shape)} does not match q {tuple(q.shape)}")
    if head_dim % 2:
        raise ValueError(f"head_dim {head_dim} must be even for rotate-half RoPE")
    if tuple(positions.shape) != (batch, seq):
        raise ValueError(f"positions {tuple(positions.shape)} != (batch, seq) {(batch, seq)}")
    freq_hi, freq_lo = _inv_freq(head_dim, q.device)
    return _apply(q, positions, freq_hi, freq_lo), _apply(k, positions, freq_hi, freq_lo)
