"""Fused decoder attention: RoPE + KV-cache write + causal attention (the article's case study).

The op, for the NEW tokens of one decoder step (prefill: cache_len = 0; decode or chunked
prefill: a few new tokens after cache_len cached ones), with n_kv_heads = n_heads (no GQA):
rotate q and k with RoPE (rotate-half, theta 10000) at positions cache_len + i, write the
rotated k and v into the KV cache at [cache_len, cache_len + seq_new), then attend causally
over cache[0 : cache_len + seq_new] with scale 1/sqrt(head_dim).

Convention: ``run(q, k, v, k_cache, v_cache, cache_len)`` returns the attention output AND
writes the caches in place; the reference does the same on its own copies. The task lists
the caches in ``mutated_inputs`` (indices 3 and 4): a checker runs reference and candidate
on separate clones of the inputs and compares those inputs afterwards, like outputs. The
caches hold a few slots past the new tokens, filled with random data, so a write out of
bounds is caught.

Search space: query / key tiles, warps, stages; and the article's three discoveries as
switches: RoPE sin/cos from a precomputed table (ROPE_TABLE), the key loop stopped at the
diagonal with the mask only on diagonal blocks (CAUSAL_SKIP), no bounds masks when the
sizes divide the tiles (EVEN_SEQ); plus the K/V cache write fused into the attention
kernel instead of a separate small kernel (FUSE_KV_WRITE); and a flash-style prefill
kernel (FLASH) that keeps RoPE and the cache write but reads the keys rotated once.
"""

from __future__ import annotations

import math

import torch

from kernels.base import (
    DTYPES,
    Config,
    Knob,
    Launch,
    Shape,
    Task,
    Tolerance,
    Variant,
    cdiv,
    register,
    vector_width,
)

ROPE_THETA = 10000.0
CACHE_SLACK = 5  # cache slots past cache_len + seq_new that must stay untouched

TEMPLATE = '''\
import math

import torch
import triton
import triton.language as tl

BLOCK_M = 64  # query rows per program
BLOCK_N = 32  # keys per step of the key loop
NUM_WARPS = 4
NUM_STAGES = 2
ROPE_TABLE = False  # RoPE cos/sin read from a precomputed table instead of computed in-kernel
CAUSAL_SKIP = False  # stop the key loop at the diagonal; mask only the diagonal blocks
EVEN_SEQ = False  # no bounds masks when seq_new % BLOCK_M == 0 and keys % BLOCK_N == 0
FUSE_KV_WRITE = False  # write rotated K and V to the cache inside the attention kernel
FLASH = False  # flash-style prefill: full-width QK^T, exp2, heaviest query blocks first

ROPE_THETA = 10000.0  # part of the op, not a knob
_ROPE_TABLES = {}  # (device, head_dim) -> (cos, sin) [positions, head_dim // 2] fp32


@triton.jit
def _load_rotated(base, rows, row_ok, stride_s, pos, cos_ptr, sin_ptr, rope_exp,
                  HALF: tl.constexpr, TABLE: tl.constexpr, MASKED: tl.constexpr):
    """Rows of x [.., 2 * HALF] rotated by RoPE at positions pos: (x1, x2) halves, fp32."""
    offs_h = tl.arange(0, HALF)
    ptrs = base + rows[:, None] * stride_s + offs_h[None, :]
    if MASKED:
        x1 = tl.load(ptrs, mask=row_ok[:, None], other=0.0).to(tl.float32)
        x2 = tl.load(ptrs + HALF, mask=row_ok[:, None], other=0.0).to(tl.float32)
    else:
        x1 = tl.load(ptrs).to(tl.float32)
        x2 = tl.load(ptrs + HALF).to(tl.float32)
    if TABLE:
        t = pos[:, None] * HALF + offs_h[None, :]
        if MASKED:
            cos = tl.load(cos_ptr + t, mask=row_ok[:, None], other=1.0)
            sin = tl.load(sin_ptr + t, mask=row_ok[:, None], other=0.0)
        else:
            cos = tl.load(cos_ptr + t)
            sin = tl.load(sin_ptr + t)
    else:
        inv_freq = tl.exp2(offs_h.to(tl.float32) * rope_exp)  # theta ** (-i / HALF)
        angle = pos.to(tl.float32)[:, None] * inv_freq[None, :]
        # reduce to [-pi, pi]: precision then holds at long positions even where cos / sin
        # lower to the approximate hardware instructions
        angle = angle - 6.283185307179586 * tl.floor(angle * 0.15915494309189535 + 0.5)
        cos = tl.cos(angle)
        sin = tl.sin(angle)
    return x1 * cos - x2 * sin, x2 * cos + x1 * sin


@triton.jit
def _attend_block(acc, m_i, l_i, q1, q2, pos_q, start, cache_len, total,
                  k_base, v_base, kc_base, vc_base, cos_ptr, sin_ptr, rope_exp,
                  stride_s, stride_cs, sm_scale,
                  HEAD_DIM: tl.constexpr, BN: tl.constexpr, TABLE: tl.constexpr,
                  FUSED: tl.constexpr, CAUSAL: tl.constexpr, BOUNDS: tl.constexpr):
    """One key block of the online softmax: scores, running max / sum, acc += p @ v."""
    HALF: tl.constexpr = HEAD_DIM // 2
    n = start + tl.arange(0, BN)
    offs_h = tl.arange(0, HALF)
    offs_d = tl.arange(0, HEAD_DIM)
    kc = kc_base + n[:, None] * stride_cs + offs_h[None, :]
    vc = vc_base + n[:, None] * stride_cs + offs_d[None, :]
    if FUSED:
        # keys before cache_len come from the cache; new keys straight from k and v,
        # rotated here, because other programs are writing them to the cache meanwhile
        cached = n < cache_len
        new = n >= cache_len
        if BOUNDS:
            new = new & (n < total)
        k1 = tl.load(kc, mask=cached[:, None], other=0.0)
        k2 = tl.load(kc + HALF, mask=cached[:, None], other=0.0)
        v = tl.load(vc, mask=cached[:, None], other=0.0)
        r1, r2 = _load_rotated(k_base, n - cache_len, new, stride_s, n, cos_ptr, sin_ptr,
                               rope_exp, HALF, TABLE, True)
        k1 = tl.where(cached[:, None], k1, r1.to(k1.dtype))
        k2 = tl.where(cached[:, None], k2, r2.to(k2.dtype))
        v_new = tl.load(v_base + (n - cache_len)[:, None] * stride_s + offs_d[None, :],
                        mask=new[:, None], other=0.0)
        v = tl.where(cached[:, None], v, v_new)
    else:
        if BOUNDS:
            ok = (n < total)[:, None]
            k1 = tl.load(kc, mask=ok, other=0.0)
            k2 = tl.load(kc + HALF, mask=ok, other=0.0)
            v = tl.load(vc, mask=ok, other=0.0)
        else:
            k1 = tl.load(kc)
            k2 = tl.load(kc + HALF)
            v = tl.load(vc)
    s = tl.dot(q1, tl.trans(k1)) + tl.dot(q2, tl.trans(k2))
    s = s * sm_scale
    if CAUSAL:
        s = tl.where(n[None, :] <= pos_q[:, None], s, -float("inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp(m_i - m_new)
    p = tl.exp(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, m_new, l_i


@triton.jit
def kv_write_kernel(k_ptr, v_ptr, kc_ptr, vc_ptr, cos_ptr, sin_ptr, rope_exp,
                    cache_len, seq_new, stride_bh, stride_s, stride_cbh, stride_cs,
                    HEAD_DIM: tl.constexpr, BM: tl.constexpr, TABLE: tl.constexpr,
                    EVEN: tl.constexpr):
    """Rotate k and copy it and v into the cache at cache_len + row (unfused form)."""
    HALF: tl.constexpr = HEAD_DIM // 2
    bh = tl.program_id(1).to(tl.int64)
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    ok = rows < seq_new
    pos = cache_len + rows
    offs_h = tl.arange(0, HALF)
    offs_d = tl.arange(0, HEAD_DIM)
    k1, k2 = _load_rotated(k_ptr + bh * stride_bh, rows, ok, stride_s, pos, cos_ptr, sin_ptr,
                           rope_exp, HALF, TABLE, not EVEN)
    kc = kc_ptr + bh * stride_cbh + pos[:, None] * stride_cs + offs_h[None, :]
    src_v = v_ptr + bh * stride_bh + rows[:, None] * stride_s + offs_d[None, :]
    dst_v = vc_ptr + bh * stride_cbh + pos[:, None] * stride_cs + offs_d[None, :]
    if EVEN:
        tl.store(kc, k1.to(kc_ptr.dtype.element_ty))
        tl.store(kc + HALF, k2.to(kc_ptr.dtype.element_ty))
        tl.store(dst_v, tl.load(src_v))
    else:
        tl.store(kc, k1.to(kc_ptr.dtype.element_ty), mask=ok[:, None])
        tl.store(kc + HALF, k2.to(kc_ptr.dtype.element_ty), mask=ok[:, None])
        tl.store(dst_v, tl.load(src_v, mask=ok[:, None]), mask=ok[:, None])


@triton.jit
def attention_kernel(out_ptr, q_ptr, k_ptr, v_ptr, kc_ptr, vc_ptr, cos_ptr, sin_ptr, rope_exp,
                     cache_len, seq_new, sm_scale,
                     stride_bh, stride_s, stride_cbh, stride_cs,
                     HEAD_DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                     TABLE: tl.constexpr, SKIP: tl.constexpr, EVEN: tl.constexpr,
                     FUSED: tl.constexpr):
    HALF: tl.constexpr = HEAD_DIM // 2
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    total = cache_len + seq_new
    rows = pid_m * BM + tl.arange(0, BM)
    row_ok = rows < seq_new
    pos_q = cache_len + rows
    offs_h = tl.arange(0, HALF)
    offs_d = tl.arange(0, HEAD_DIM)
    k_base = k_ptr + bh * stride_bh
    v_base = v_ptr + bh * stride_bh
    kc_base = kc_ptr + bh * stride_cbh
    vc_base = vc_ptr + bh * stride_cbh

    q1, q2 = _load_rotated(q_ptr + bh * stride_bh, rows, row_ok, stride_s, pos_q,
                           cos_ptr, sin_ptr, rope_exp, HALF, TABLE, not EVEN)
    q1 = q1.to(q_ptr.dtype.element_ty)
    q2 = q2.to(q_ptr.dtype.element_ty)

    if FUSED:  # this program writes the cache rows of its own query block
        k1, k2 = _load_rotated(k_base, rows, row_ok, stride_s, pos_q, cos_ptr, sin_ptr,
                               rope_exp, HALF, TABLE, not EVEN)
        kc = kc_base + pos_q[:, None] * stride_cs + offs_h[None, :]
        src_v = v_base + rows[:, None] * stride_s + offs_d[None, :]
        dst_v = vc_base + pos_q[:, None] * stride_cs + offs_d[None, :]
        if EVEN:
            tl.store(kc, k1.to(kc_ptr.dtype.element_ty))
            tl.store(kc + HALF, k2.to(kc_ptr.dtype.element_ty))
            tl.store(dst_v, tl.load(src_v))
        else:
            tl.store(kc, k1.to(kc_ptr.dtype.element_ty), mask=row_ok[:, None])
            tl.store(kc + HALF, k2.to(kc_ptr.dtype.element_ty), mask=row_ok[:, None])
            tl.store(dst_v, tl.load(src_v, mask=row_ok[:, None]), mask=row_ok[:, None])

    m_i = tl.full([BM], -float("inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, HEAD_DIM], tl.float32)
    if SKIP:
        # blocks wholly at or below the smallest query position need no mask at all;
        # blocks past the largest query position are never visited
        q_lo = cache_len + pid_m * BM
        full_end = ((q_lo + 1) // BN) * BN
        diag_end = tl.minimum(total, q_lo + BM)
    else:
        full_end = 0
        diag_end = total
    for start in range(0, full_end, BN):
        acc, m_i, l_i = _attend_block(acc, m_i, l_i, q1, q2, pos_q, start, cache_len, total,
                                      k_base, v_base, kc_base, vc_base, cos_ptr, sin_ptr,
                                      rope_exp, stride_s, stride_cs, sm_scale,
                                      HEAD_DIM, BN, TABLE, FUSED, False, False)
    for start in range(full_end, diag_end, BN):
        acc, m_i, l_i = _attend_block(acc, m_i, l_i, q1, q2, pos_q, start, cache_len, total,
                                      k_base, v_base, kc_base, vc_base, cos_ptr, sin_ptr,
                                      rope_exp, stride_s, stride_cs, sm_scale,
                                      HEAD_DIM, BN, TABLE, FUSED, True, not EVEN)
    out = acc / l_i[:, None]
    o_ptrs = out_ptr + bh * stride_bh + rows[:, None] * stride_s + offs_d[None, :]
    if EVEN:
        tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty))
    else:
        tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])


@triton.jit
def flash_attention_kernel(out_ptr, q_ptr, kc_ptr, vc_ptr, cos_ptr, sin_ptr, rope_exp,
                           cache_len, seq_new, qk_scale, n_blocks_m,
                           stride_bh, stride_s, stride_cbh, stride_cs,
                           HEAD_DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                           TABLE: tl.constexpr, EVEN: tl.constexpr):
    """Causal attention over the cache (rotated K and V already written by kv_write_kernel):
    q rotated at load and pre-scaled by 1/sqrt(d) * log2(e), one [BM, HEAD_DIM] x
    [HEAD_DIM, BN] product per key block, exp2 online softmax, the mask only on the
    diagonal blocks, and the query blocks taken last-first (they have the most keys), so
    the long programs start in the first wave and the short ones fill the tail."""
    HALF: tl.constexpr = HEAD_DIM // 2
    bh = tl.program_id(0).to(tl.int64)
    pid_m = n_blocks_m - 1 - tl.program_id(1)
    total = cache_len + seq_new
    rows = pid_m * BM + tl.arange(0, BM)
    row_ok = rows < seq_new
    pos_q = cache_len + rows
    offs_d = tl.arange(0, HEAD_DIM)
    # rotate-half RoPE on the full row: x * cos + sign * partner * sin, partner = x[d +- HALF]
    half_d = offs_d % HALF
    partner = (offs_d + HALF) % HEAD_DIM
    sign = tl.where(offs_d < HALF, -1.0, 1.0)
    q_base = q_ptr + bh * stride_bh + rows[:, None] * stride_s
    if EVEN:
        x = tl.load(q_base + offs_d[None, :]).to(tl.float32)
        xp = tl.load(q_base + partner[None, :]).to(tl.float32)
    else:
        x = tl.load(q_base + offs_d[None, :], mask=row_ok[:, None], other=0.0).to(tl.float32)
        xp = tl.load(q_base + partner[None, :], mask=row_ok[:, None], other=0.0).to(tl.float32)
    if TABLE:
        t = pos_q[:, None] * HALF + half_d[None, :]
        if EVEN:
            cos = tl.load(cos_ptr + t)
            sin = tl.load(sin_ptr + t)
        else:
            cos = tl.load(cos_ptr + t, mask=row_ok[:, None], other=1.0)
            sin = tl.load(sin_ptr + t, mask=row_ok[:, None], other=0.0)
    else:
        inv_freq = tl.exp2(half_d.to(tl.float32) * rope_exp)
        angle = pos_q.to(tl.float32)[:, None] * inv_freq[None, :]
        angle = angle - 6.283185307179586 * tl.floor(angle * 0.15915494309189535 + 0.5)
        cos = tl.cos(angle)
        sin = tl.sin(angle)
    q = ((x * cos + sign[None, :] * xp * sin) * qk_scale).to(q_ptr.dtype.element_ty)

    kc_base = kc_ptr + bh * stride_cbh
    vc_base = vc_ptr + bh * stride_cbh
    m_i = tl.full([BM], -float("inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, HEAD_DIM], tl.float32)
    q_lo = cache_len + pid_m * BM
    full_end = ((q_lo + 1) // BN) * BN  # key blocks wholly visible to every query row
    diag_end = tl.minimum(total, q_lo + BM)
    offs_n = tl.arange(0, BN)
    for start in range(0, full_end, BN):
        n = start + offs_n
        k = tl.load(kc_base + n[:, None] * stride_cs + offs_d[None, :])
        v = tl.load(vc_base + n[:, None] * stride_cs + offs_d[None, :])
        s = tl.dot(q, tl.trans(k))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    for start in range(full_end, diag_end, BN):
        n = start + offs_n
        if EVEN:
            k = tl.load(kc_base + n[:, None] * stride_cs + offs_d[None, :])
            v = tl.load(vc_base + n[:, None] * stride_cs + offs_d[None, :])
        else:
            ok = (n < total)[:, None]
            k = tl.load(kc_base + n[:, None] * stride_cs + offs_d[None, :], mask=ok, other=0.0)
            v = tl.load(vc_base + n[:, None] * stride_cs + offs_d[None, :], mask=ok, other=0.0)
        s = tl.dot(q, tl.trans(k))
        s = tl.where(n[None, :] <= pos_q[:, None], s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    o_ptrs = out_ptr + bh * stride_bh + rows[:, None] * stride_s + offs_d[None, :]
    if EVEN:
        tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty))
    else:
        tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])


def _rope_table(device, head_dim, n_positions):
    """cos / sin for positions [0, n): built once per device and head_dim, like a model's
    RoPE buffer, and grown to the next power of two when a longer sequence comes."""
    key = (str(device), head_dim)
    cached = _ROPE_TABLES.get(key)
    if cached is None or cached[0].shape[0] < n_positions:
        n = max(4096, triton.next_power_of_2(n_positions))
        half = head_dim // 2
        inv_freq = ROPE_THETA ** (-torch.arange(half, dtype=torch.float64) / half)
        angles = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq[None, :]
        cached = (angles.cos().float().to(device), angles.sin().float().to(device))
        _ROPE_TABLES[key] = cached
    return cached


def run(q, k, v, k_cache, v_cache, cache_len):
    B, H, S, D = q.shape
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k, v must share [batch, heads, seq, head_dim]: "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if k_cache.shape != v_cache.shape or k_cache.shape[:2] != (B, H) or k_cache.shape[3] != D:
        raise ValueError(f"caches must be [{B}, {H}, max_seq, {D}]: "
                         f"{tuple(k_cache.shape)}, {tuple(v_cache.shape)}")
    if not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        raise ValueError("caches must be contiguous: they are written in place")
    if D < 32 or D & (D - 1):
        raise ValueError(f"head_dim must be a power of two >= 32, got {D}")
    if cache_len < 0 or cache_len + S > k_cache.shape[2]:
        raise ValueError(f"cache_len {cache_len} + seq {S} exceeds cache size {k_cache.shape[2]}")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty_like(q)
    total = cache_len + S
    cos, sin = _rope_table(q.device, D, total) if ROPE_TABLE else (q, q)  # q: never read
    rope_exp = -math.log2(ROPE_THETA) / (D // 2)
    even_rows = EVEN_SEQ and S % BLOCK_M == 0
    even = even_rows and total % BLOCK_N == 0
    grid = (triton.cdiv(S, BLOCK_M), B * H)
    strides = (q.stride(1), q.stride(2), k_cache.stride(1), k_cache.stride(2))
    if FLASH and not FUSE_KV_WRITE:
        kv_write_kernel[grid](k, v, k_cache, v_cache, cos, sin, rope_exp, cache_len, S, *strides,
                              HEAD_DIM=D, BM=BLOCK_M, TABLE=ROPE_TABLE, EVEN=even_rows,
                              num_warps=NUM_WARPS)
        n_blocks = triton.cdiv(S, BLOCK_M)
        flash_attention_kernel[(B * H, n_blocks)](
            out, q, k_cache, v_cache, cos, sin, rope_exp, cache_len, S,
            1.4426950408889634 / math.sqrt(D), n_blocks, *strides,
            HEAD_DIM=D, BM=BLOCK_M, BN=BLOCK_N, TABLE=ROPE_TABLE, EVEN=even,
            num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        return out
    if not FUSE_KV_WRITE:
        kv_write_kernel[grid](k, v, k_cache, v_cache, cos, sin, rope_exp, cache_len, S, *strides,
                              HEAD_DIM=D, BM=BLOCK_M, TABLE=ROPE_TABLE, EVEN=even_rows,
                              num_warps=NUM_WARPS)
    attention_kernel[grid](out, q, k, v, k_cache, v_cache, cos, sin, rope_exp,
                           cache_len, S, 1.0 / math.sqrt(D), *strides,
                           HEAD_DIM=D, BM=BLOCK_M, BN=BLOCK_N, TABLE=ROPE_TABLE,
                           SKIP=CAUSAL_SKIP, EVEN=even, FUSED=FUSE_KV_WRITE,
                           num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return out
'''


def rope_cos_sin(positions: torch.Tensor, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [len(positions), head_dim // 2] in fp64: the reference's exact angles."""
    half = head_dim // 2
    inv_freq = ROPE_THETA ** (
        -torch.arange(half, dtype=torch.float64, device=positions.device) / half
    )
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE of x [..., seq, head_dim] (fp32 in, fp32 out)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    cos, sin = cos.float(), sin.float()
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cache_len: int,
) -> torch.Tensor:
    """The op in plain fp32 PyTorch. Writes the caches in place, like the kernel."""
    seq, head_dim = q.shape[2], q.shape[3]
    total = cache_len + seq
    positions = torch.arange(cache_len, total, device=q.device)
    cos, sin = rope_cos_sin(positions, head_dim)
    q_rot = apply_rope(q.float(), cos, sin)
    k_cache[:, :, cache_len:total] = apply_rope(k.float(), cos, sin).to(k_cache.dtype)
    v_cache[:, :, cache_len:total] = v.to(v_cache.dtype)
    keys = k_cache[:, :, :total].float()
    values = v_cache[:, :, :total].float()
    scores = (q_rot @ keys.transpose(-1, -2)) / math.sqrt(head_dim)
    visible = torch.arange(total, device=q.device)[None, :] <= positions[:, None]
    scores = scores.masked_fill(~visible, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ values).to(q.dtype)


def make_inputs(shape: Shape, dtype: torch.dtype, seed: int, device: str) -> tuple:
    """q, k, v for the new tokens; caches with cache_len random (already rotated) entries
    and CACHE_SLACK random slots past the new tokens; then cache_len itself."""
    batch, heads, seq, cache_len, head_dim = shape
    gen = torch.Generator(device=device).manual_seed(seed)
    new = (batch, heads, seq, head_dim)
    cache = (batch, heads, cache_len + seq + CACHE_SLACK, head_dim)
    q, k, v = (torch.randn(new, generator=gen, device=device) for _ in range(3))
    k_cache, v_cache = (torch.randn(cache, generator=gen, device=device) for _ in range(2))
    tensors = (q, k, v, k_cache, v_cache)
    return (*(t.to(device=device, dtype=dtype) for t in tensors), cache_len)


def _visible_pairs(seq: int, cache_len: int) -> int:
    """(query, key) pairs the causal mask keeps: query i sees cache_len + i + 1 keys."""
    return seq * cache_len + seq * (seq + 1) // 2


def bytes_moved(shape: Shape, dtype: torch.dtype) -> int:
    """Least traffic: read q, k, v and the cached prefix of K and V; write K and V of the
    new tokens into the cache and the output."""
    batch, heads, seq, cache_len, head_dim = shape
    elems = batch * heads * head_dim * (6 * seq + 2 * cache_len)
    return elems * torch.finfo(dtype).bits // 8


def flops(shape: Shape, dtype: torch.dtype) -> int:
    """Two matmuls (q k^T and p v) over the visible pairs; RoPE and softmax are minor."""
    batch, heads, seq, cache_len, head_dim = shape
    return 4 * batch * heads * head_dim * _visible_pairs(seq, cache_len)


def smem_bytes(cfg: Config, shape: Shape, dtype: torch.dtype) -> int:
    """Shared memory of one program: the Q tile, NUM_STAGES buffers of the K and V tiles
    read from the cache and, with the fused cache write, NUM_STAGES - 1 more of the new
    keys and values read from k and v (plus their fp32 cos / sin rows with the RoPE table).
    Fitted on the H200 (Triton 3.6, head_dim 128, benchmarks/space/attention_float16.json):
    exact on every point but the unfused 16-row tile, which it over-counts (that tile
    takes the mma.sync path with one K/V buffer); the infeasible point it predicts, 256
    KiB, is what Triton asked for."""
    head_dim, size = shape[4], dtype.itemsize
    bm, bn, stages = int(cfg["BLOCK_M"]), int(cfg["BLOCK_N"]), int(cfg["NUM_STAGES"])
    need = bm * head_dim * size + stages * 2 * bn * head_dim * size
    if cfg["FUSE_KV_WRITE"]:
        table = 2 * bn * (head_dim // 2) * 4 if cfg["ROPE_TABLE"] else 0
        need += (stages - 1) * (2 * bn * head_dim * size + table)
    return need


def constraint(cfg: Config) -> str | None:
    """Prune to the points worth a GPU measurement (60)."""
    bm, bn = int(cfg["BLOCK_M"]), int(cfg["BLOCK_N"])
    warps, stages = int(cfg["NUM_WARPS"]), int(cfg["NUM_STAGES"])
    if (bm == 128) != (warps == 8):
        return "16 query rows a warp: 8 warps for 128-row blocks, 4 below"
    if bm == 16 and bn != 64:
        return "the 16-row block is the decode tile: it steps 64 keys at a time"
    if bn < bm // 2:
        return "a key step under half the query block wastes the Q tile's reuse"
    if stages == 3 and (bm, bn) != (128, 64):
        return "3 K/V stages are measured on the 128x64 tile, where each stage feeds most math"
    if cfg["EVEN_SEQ"] and not cfg["CAUSAL_SKIP"]:
        return "EVEN_SEQ specialises the causal-skip loops; without skip every block is masked"
    if cfg["FLASH"] and (cfg["FUSE_KV_WRITE"] or not cfg["CAUSAL_SKIP"]):
        return "FLASH reads keys rotated once into the cache (no FUSE_KV_WRITE) and always " \
               "skips past the diagonal (CAUSAL_SKIP)"
    if cfg["FLASH"] and bm == 16:
        return "FLASH is the prefill tile; 16-row blocks are for decode"
    if bn == 128 and not (cfg["FLASH"] and bm == 128):
        return "128-key steps are measured on the flash kernel's 128-row tile"
    return None
def launch(cfg: Config, shape: Shape, dtype: str) -> Launch:
    """run()'s attention grid: one program per (BLOCK_M query rows, batch x head); K and V
    tiles staged in shared memory NUM_STAGES deep; the Q tile, the fp32 output accumulator
    and the [BLOCK_M, BLOCK_N] fp32 scores in registers. Without FUSE_KV_WRITE a cache-write
    kernel runs first on the same grid: its programs are counted too."""
    batch, heads, seq, _cache_len, head_dim = shape
    size = DTYPES[dtype].itemsize
    bm, bn = int(cfg["BLOCK_M"]), int(cfg["BLOCK_N"])
    stages = int(cfg["NUM_STAGES"])
    grid = cdiv(seq, bm) * batch * heads
    smem = smem_bytes(cfg, shape, DTYPES[dtype])  # the fitted model the space uses
    threads = int(cfg["NUM_WARPS"]) * 32
    programs = grid if cfg["FUSE_KV_WRITE"] else 2 * grid
    return Launch(programs=programs, threads_per_program=threads,
                  elements_per_program=bm * head_dim, bytes_per_element=size,
                  tile_bytes=smem + bm * head_dim * (size + 4) + bm * bn * 4, smem_bytes=smem,
                  num_stages=stages, vector_width=vector_width(bn * head_dim, threads, size))




TASK = register(
    Task(
        name="attention",
        op_type="attention",
        description=(
            "Fused decoder attention for the new tokens of a step: RoPE (rotate-half, theta "
            "10000) on q and k at positions cache_len + i, the rotated k and v written into "
            "the KV cache in place, causal attention over cache[0 : cache_len + seq_new] "
            "with scale 1/sqrt(head_dim). n_kv_heads = n_heads."
        ),
        signature=(
            "run(q, k, v: Tensor[batch, heads, seq_new, head_dim], k_cache, v_cache: "
            "Tensor[batch, heads, max_seq, head_dim], cache_len: int) -> Tensor[batch, heads, "
            "seq_new, head_dim]; writes k_cache and v_cache in place"
        ),
        reference=reference,
        make_inputs=make_inputs,
        shape_names=("batch", "heads", "seq_new", "cache_len", "head_dim"),
        # prefill at 128..4096 tokens, batch 1..32, 32 heads x 128 (Llama-7B/8B-like); a
        # chunked prefill after a long prefix; a batched decode step of a few tokens
        sweep_shapes=(
            (1, 32, 128, 0, 128), (32, 32, 128, 0, 128), (4, 32, 1024, 0, 128),
            (1, 32, 4096, 0, 128), (8, 32, 256, 3840, 128), (32, 32, 4, 1020, 128),
        ),
        # decode of one token (empty and odd cache), shorter than any block, non-power-of-
        # two lengths, odd cache lengths, head_dim 32 (the smallest the dot halves allow)
        edge_shapes=(
            (1, 2, 1, 0, 64), (2, 2, 1, 37, 64), (1, 2, 7, 0, 64), (2, 3, 100, 0, 64),
            (1, 2, 9, 13, 32), (1, 2, 33, 63, 128), (1, 1, 1000, 0, 64),
        ),
        cpu_shapes=((1, 2, 16, 0, 32), (1, 2, 40, 24, 64)),
        dtypes=("float16", "bfloat16"),
        tolerances={
            "float16": Tolerance(atol=5e-3, rtol=1e-2, max_bias=2e-3),
            "bfloat16": Tolerance(atol=3e-2, rtol=3e-2, max_bias=1e-2),
        },
        bytes_moved=bytes_moved,
        flops=flops,
        template=TEMPLATE,
        knobs=(
            Knob("BLOCK_M", (16, 64, 128), "tiling", "query rows per program"),
            Knob("BLOCK_N", (32, 64, 128), "tiling",
                 "keys per step of the key loop (128: the flash prefill tile only)"),
            Knob("NUM_WARPS", (4, 8), "warps_stages"),
            Knob("NUM_STAGES", (2, 3), "warps_stages", "software pipelining of K/V loads"),
        ),
        variants=(
            Variant("ROPE_TABLE", (False, True), "precompute",
                    "read RoPE cos/sin from a table built once per device and head_dim "
                    "instead of exp2/cos/sin in every program (the fused form recomputes "
                    "them for every key block it visits)"),
            Variant("CAUSAL_SKIP", (False, True), "causal_skip",
                    "stop the key loop at the diagonal block and mask only the diagonal "
                    "blocks, instead of visiting and masking every key block"),
            Variant("EVEN_SEQ", (False, True), "specialization",
                    "drop the bounds masks when seq_new % BLOCK_M == 0 and the key count "
                    "% BLOCK_N == 0 (checked at launch; masked path otherwise)"),
            Variant("FUSE_KV_WRITE", (False, True), "fusion",
                    "write rotated K and V to the cache inside the attention kernel (one "
                    "launch; new keys rotated from k directly) instead of a separate kernel"),
            Variant("FLASH", (False, True), "algorithm",
                    "flash-style prefill: the cache-write kernel rotates K once, then the "
                    "attention kernel rotates q at load with the softmax scale and log2(e) "
                    "folded in, takes one full-width QK^T product per key block (not two "
                    "half-width ones), exp2 online softmax, and runs the query blocks with "
                    "the most keys first (grid heads x blocks, last block first)"),
        ),
        related_ops=("softmax", "rope", "matmul"),
        constraint=constraint,
        mutated_inputs=(3, 4),
        smem_bytes=smem_bytes,
        launch=launch,
    )
)
