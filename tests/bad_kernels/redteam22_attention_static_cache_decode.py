"""Red team 22 plant (attention): decode over a cache with room drops the key masks.

Class: inputs never built: a layout (a KV cache with spare capacity). The template,
plus, for a decode step (`seq_new == 1`) whose cache holds at least a whole key block
(`BLOCK_N`, 32) past `cache_len + 1`, a key loop with neither the causal nor the bounds
mask ("one query sees every key, and the block's slots are in the cache"): the last
block's slots past the last key enter the softmax. The judge's caches always have
exactly 5 slots past the last key (read at run time: `max_seq - (cache_len + seq_new)`
is 5 for every CPU and edge shape, two reach-sized shapes, six seeds, plain and under
every condition), so the path is never taken; on a judge layout the block past the
last key would be out of bounds or the NaN-filled spare slots, both caught.

Why a real user is hurt: preallocated caches are the norm: HF's StaticCache (and every
`torch.compile`d generate) allocates `max_cache_len` slots up front, servers keep a cache
per slot of the batch. Every decode step whose length is not a multiple of 32 averages
in the empty (zero) slots, or, where the cache is reused, the previous request's keys
and values.

Why a judge should refuse it: wrong on the most common decode layout and right only on a
cache sized to the step.

Evidence (CPU, Triton interpreter, defaults, allow-list on):
    evaluate("attention", source, shapes="auto", seeds=1) -> ok=True, error_kind None
    (66 s from /tmp/rt22/p without this docstring; 94 s from here)
Outside the judge (`get_task("attention").reference`, /tmp/rt22/verify_attention_static.py),
fp16, (batch, heads, new, cached, head_dim) = (1, 2, 1, 100, 64): cache of 106 slots (the
judge's layout) 1.5e-4 (right); **a zeroed static cache of 4,096 slots: max|err| 0.080
against max|ref| 0.48; reused (an earlier request's k/v past cache_len): 0.40 against
0.38**; 127 cached + 1 (block-aligned) 2.4e-4 and a 16-token prefill 2.4e-4 (right); the
caches written equal the reference's in every case.
"""
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
_ROPE_TABLES = {}  # (kind, device, head_dim) -> RoPE tensors built once, fp32


@triton.jit
def _rope_cos_sin(pos, offs, freq_ptr, HALF: tl.constexpr):
    """cos / sin of pos * inv_freq[offs], [len(pos), len(offs)] fp32, accurate at long
    positions: inv_freq comes as an fp32 pair hi + lo (from fp64, see _inv_freq), the fma
    keeps the rounding error of pos * hi, and 2 * pi is taken off in two parts (at
    position 131071 a plain fp32 angle is off by 0.002 rad, 0.007 in a rotated key)."""
    p, hi = tl.broadcast(pos.to(tl.float32)[:, None], tl.load(freq_ptr + offs)[None, :])
    p, lo = tl.broadcast(p, tl.load(freq_ptr + HALF + offs)[None, :])
    angle = p * hi
    err = tl.fma(p, hi, -angle) + p * lo
    turns = tl.floor(angle * 0.15915494309189535 + 0.5)
    r = tl.fma(-turns, 6.2831854820251465, angle)
    r = tl.fma(-turns, -1.7484555314695172e-07, r) + err
    return tl.cos(r), tl.sin(r)


@triton.jit
def _load_rotated(base, rows, row_ok, stride_s, pos, cos_ptr, sin_ptr, freq_ptr,
                  HALF: tl.constexpr, TABLE: tl.constexpr, MASKED: tl.constexpr):
    """Rows of x [.., 2 * HALF] rotated by RoPE at positions pos: (x1, x2) halves, fp32."""
    offs_h = tl.arange(0, HALF)
    ptrs = base + rows[:, None].to(tl.int64) * stride_s + offs_h[None, :]
    if MASKED:
        x1 = tl.load(ptrs, mask=row_ok[:, None], other=0.0).to(tl.float32)
        x2 = tl.load(ptrs + HALF, mask=row_ok[:, None], other=0.0).to(tl.float32)
    else:
        x1 = tl.load(ptrs).to(tl.float32)
        x2 = tl.load(ptrs + HALF).to(tl.float32)
    if TABLE:
        t = pos[:, None].to(tl.int64) * HALF + offs_h[None, :]
        if MASKED:
            cos = tl.load(cos_ptr + t, mask=row_ok[:, None], other=1.0)
            sin = tl.load(sin_ptr + t, mask=row_ok[:, None], other=0.0)
        else:
            cos = tl.load(cos_ptr + t)
            sin = tl.load(sin_ptr + t)
    else:
        cos, sin = _rope_cos_sin(pos, offs_h, freq_ptr, HALF)
    return x1 * cos - x2 * sin, x2 * cos + x1 * sin


@triton.jit
def _attend_block(acc, m_i, l_i, q1, q2, pos_q, start, cache_len, total,
                  k_base, v_base, kc_base, vc_base, cos_ptr, sin_ptr, freq_ptr,
                  stride_s, stride_cs, sm_scale,
                  HEAD_DIM: tl.constexpr, BN: tl.constexpr, TABLE: tl.constexpr,
                  FUSED: tl.constexpr, CAUSAL: tl.constexpr, BOUNDS: tl.constexpr):
    """One key block of the online softmax: scores, running max / sum, acc += p @ v."""
    HALF: tl.constexpr = HEAD_DIM // 2
    n = start + tl.arange(0, BN)
    offs_h = tl.arange(0, HALF)
    offs_d = tl.arange(0, HEAD_DIM)
    kc = kc_base + n[:, None].to(tl.int64) * stride_cs + offs_h[None, :]
    vc = vc_base + n[:, None].to(tl.int64) * stride_cs + offs_d[None, :]
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
        new_rows = n.to(tl.int64) - cache_len  # rows of k and v (64-bit: an address's)
        r1, r2 = _load_rotated(k_base, new_rows, new, stride_s, n, cos_ptr, sin_ptr,
                               freq_ptr, HALF, TABLE, True)
        k1 = tl.where(cached[:, None], k1, r1.to(k1.dtype))
        k2 = tl.where(cached[:, None], k2, r2.to(k2.dtype))
        new_at = new_rows[:, None] * stride_s + offs_d[None, :]
        v_new = tl.load(v_base + new_at, mask=new[:, None], other=0.0)
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
def kv_write_kernel(k_ptr, v_ptr, kc_ptr, vc_ptr, cos_ptr, sin_ptr, freq_ptr,
                    cache_len, seq_new, stride_bh, stride_s, stride_cbh, stride_cs,
                    HEAD_DIM: tl.constexpr, BM: tl.constexpr, TABLE: tl.constexpr,
                    EVEN: tl.constexpr):
    """Rotate k and copy it and v into the cache at cache_len + row (unfused form)."""
    HALF: tl.constexpr = HEAD_DIM // 2
    bh = tl.program_id(1).to(tl.int64)
    rows = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)  # 64-bit from the grid on
    ok = rows < seq_new
    pos = cache_len + rows
    offs_h = tl.arange(0, HALF)
    offs_d = tl.arange(0, HEAD_DIM)
    k1, k2 = _load_rotated(k_ptr + bh * stride_bh, rows, ok, stride_s, pos, cos_ptr, sin_ptr,
                           freq_ptr, HALF, TABLE, not EVEN)
    kc = kc_ptr + bh * stride_cbh + pos[:, None].to(tl.int64) * stride_cs + offs_h[None, :]
    src_v = v_ptr + bh * stride_bh + rows[:, None].to(tl.int64) * stride_s + offs_d[None, :]
    dst_v = vc_ptr + bh * stride_cbh + pos[:, None].to(tl.int64) * stride_cs + offs_d[None, :]
    if EVEN:
        tl.store(kc, k1.to(kc_ptr.dtype.element_ty))
        tl.store(kc + HALF, k2.to(kc_ptr.dtype.element_ty))
        tl.store(dst_v, tl.load(src_v))
    else:
        tl.store(kc, k1.to(kc_ptr.dtype.element_ty), mask=ok[:, None])
        tl.store(kc + HALF, k2.to(kc_ptr.dtype.element_ty), mask=ok[:, None])
        tl.store(dst_v, tl.load(src_v, mask=ok[:, None]), mask=ok[:, None])


@triton.jit
def attention_kernel(out_ptr, q_ptr, k_ptr, v_ptr, kc_ptr, vc_ptr, cos_ptr, sin_ptr, freq_ptr,
                     cache_len, seq_new, sm_scale,
                     stride_bh, stride_s, stride_cbh, stride_cs,
                     HEAD_DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                     TABLE: tl.constexpr, SKIP: tl.constexpr, EVEN: tl.constexpr,
                     FUSED: tl.constexpr, ROOMY: tl.constexpr):
    HALF: tl.constexpr = HEAD_DIM // 2
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    total = cache_len + seq_new
    rows = pid_m.to(tl.int64) * BM + tl.arange(0, BM)
    row_ok = rows < seq_new
    pos_q = cache_len + rows
    offs_h = tl.arange(0, HALF)
    offs_d = tl.arange(0, HEAD_DIM)
    k_base = k_ptr + bh * stride_bh
    v_base = v_ptr + bh * stride_bh
    kc_base = kc_ptr + bh * stride_cbh
    vc_base = vc_ptr + bh * stride_cbh

    q1, q2 = _load_rotated(q_ptr + bh * stride_bh, rows, row_ok, stride_s, pos_q,
                           cos_ptr, sin_ptr, freq_ptr, HALF, TABLE, not EVEN)
    q1 = q1.to(q_ptr.dtype.element_ty)
    q2 = q2.to(q_ptr.dtype.element_ty)

    if FUSED:  # this program writes the cache rows of its own query block
        k1, k2 = _load_rotated(k_base, rows, row_ok, stride_s, pos_q, cos_ptr, sin_ptr,
                               freq_ptr, HALF, TABLE, not EVEN)
        kc = kc_base + pos_q[:, None].to(tl.int64) * stride_cs + offs_h[None, :]
        src_v = v_base + rows[:, None].to(tl.int64) * stride_s + offs_d[None, :]
        dst_v = vc_base + pos_q[:, None].to(tl.int64) * stride_cs + offs_d[None, :]
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
    if ROOMY:
        # a decode step's one query sees every key, and the cache has room for a whole key
        # block past the last key: no causal mask and no bounds mask in the key loop
        for start in range(0, total, BN):
            acc, m_i, l_i = _attend_block(acc, m_i, l_i, q1, q2, pos_q, start, cache_len,
                                          total, k_base, v_base, kc_base, vc_base, cos_ptr,
                                          sin_ptr, freq_ptr, stride_s, stride_cs, sm_scale,
                                          HEAD_DIM, BN, TABLE, FUSED, False, False)
    else:
        for start in range(0, full_end, BN):
            acc, m_i, l_i = _attend_block(acc, m_i, l_i, q1, q2, pos_q, start, cache_len,
                                          total, k_base, v_base, kc_base, vc_base, cos_ptr,
                                          sin_ptr, freq_ptr, stride_s, stride_cs, sm_scale,
                                          HEAD_DIM, BN, TABLE, FUSED, False, False)
        for start in range(full_end, diag_end, BN):
            acc, m_i, l_i = _attend_block(acc, m_i, l_i, q1, q2, pos_q, start, cache_len,
                                          total, k_base, v_base, kc_base, vc_base, cos_ptr,
                                          sin_ptr, freq_ptr, stride_s, stride_cs, sm_scale,
                                          HEAD_DIM, BN, TABLE, FUSED, True, not EVEN)
    out = acc / l_i[:, None]
    o_ptrs = out_ptr + bh * stride_bh + rows[:, None].to(tl.int64) * stride_s + offs_d[None, :]
    if EVEN:
        tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty))
    else:
        tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])


@triton.jit
def flash_attention_kernel(out_ptr, q_ptr, kc_ptr, vc_ptr, cos_ptr, sin_ptr, freq_ptr,
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
    rows = pid_m.to(tl.int64) * BM + tl.arange(0, BM)
    row_ok = rows < seq_new
    pos_q = cache_len + rows
    offs_d = tl.arange(0, HEAD_DIM)
    # rotate-half RoPE on the full row: x * cos + sign * partner * sin, partner = x[d +- HALF]
    half_d = offs_d % HALF
    partner = (offs_d + HALF) % HEAD_DIM
    sign = tl.where(offs_d < HALF, -1.0, 1.0)
    q_base = q_ptr + bh * stride_bh + rows[:, None].to(tl.int64) * stride_s
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
        cos, sin = _rope_cos_sin(pos_q, half_d, freq_ptr, HALF)
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
        at = n[:, None].to(tl.int64) * stride_cs + offs_d[None, :]
        k = tl.load(kc_base + at)
        v = tl.load(vc_base + at)
        s = tl.dot(q, tl.trans(k))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    for start in range(full_end, diag_end, BN):
        n = start + offs_n
        at = n[:, None].to(tl.int64) * stride_cs + offs_d[None, :]
        if EVEN:
            k = tl.load(kc_base + at)
            v = tl.load(vc_base + at)
        else:
            ok = (n < total)[:, None]
            k = tl.load(kc_base + at, mask=ok, other=0.0)
            v = tl.load(vc_base + at, mask=ok, other=0.0)
        s = tl.dot(q, tl.trans(k))
        s = tl.where(n[None, :] <= pos_q[:, None], s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    o_ptrs = out_ptr + bh * stride_bh + rows[:, None].to(tl.int64) * stride_s + offs_d[None, :]
    if EVEN:
        tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty))
    else:
        tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])


def _inv_freq(device, head_dim):
    """theta ** (-i / half) as fp32 hi and lo rows [2, head_dim // 2] (hi + lo is the fp64
    value to 48 bits), built once per device and head_dim."""
    key = ("inv_freq", str(device), head_dim)
    if key not in _ROPE_TABLES:
        half = head_dim // 2
        exact = ROPE_THETA ** (-torch.arange(half, dtype=torch.float64) / half)
        hi = exact.float()
        lo = (exact - hi.double()).float()
        _ROPE_TABLES[key] = torch.stack((hi, lo)).to(device)
    return _ROPE_TABLES[key]


def _rope_table(device, head_dim, n_positions):
    """cos / sin for positions [0, n): built once per device and head_dim, like a model's
    RoPE buffer, and grown to the next power of two when a longer sequence comes."""
    key = ("cos_sin", str(device), head_dim)
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
    inv_freq = _inv_freq(q.device, D)
    even_rows = EVEN_SEQ and S % BLOCK_M == 0
    even = even_rows and total % BLOCK_N == 0
    grid = (triton.cdiv(S, BLOCK_M), B * H)
    roomy = S == 1 and not FUSE_KV_WRITE and k_cache.shape[2] - total >= BLOCK_N
    strides = (q.stride(1), q.stride(2), k_cache.stride(1), k_cache.stride(2))
    if FLASH and not FUSE_KV_WRITE:
        kv_write_kernel[grid](k, v, k_cache, v_cache, cos, sin, inv_freq, cache_len, S, *strides,
                              HEAD_DIM=D, BM=BLOCK_M, TABLE=ROPE_TABLE, EVEN=even_rows,
                              num_warps=NUM_WARPS)
        n_blocks = triton.cdiv(S, BLOCK_M)
        flash_attention_kernel[(B * H, n_blocks)](
            out, q, k_cache, v_cache, cos, sin, inv_freq, cache_len, S,
            1.4426950408889634 / math.sqrt(D), n_blocks, *strides,
            HEAD_DIM=D, BM=BLOCK_M, BN=BLOCK_N, TABLE=ROPE_TABLE, EVEN=even,
            num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        return out
    if not FUSE_KV_WRITE:
        kv_write_kernel[grid](k, v, k_cache, v_cache, cos, sin, inv_freq, cache_len, S, *strides,
                              HEAD_DIM=D, BM=BLOCK_M, TABLE=ROPE_TABLE, EVEN=even_rows,
                              num_warps=NUM_WARPS)
    attention_kernel[grid](out, q, k, v, k_cache, v_cache, cos, sin, inv_freq,
                           cache_len, S, 1.0 / math.sqrt(D), *strides,
                           HEAD_DIM=D, BM=BLOCK_M, BN=BLOCK_N, TABLE=ROPE_TABLE,
                           SKIP=CAUSAL_SKIP, EVEN=even, FUSED=FUSE_KV_WRITE, ROOMY=roomy,
                           num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return out
