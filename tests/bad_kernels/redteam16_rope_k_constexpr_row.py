"""Red team 16 (rope): the template's fused q/k kernel with q and k packed
(`.contiguous()`, as the template does) and their token strides specialised
(`Q_ROW` / `K_ROW: tl.constexpr`, heads x head_dim). q's token offset is 64-bit
(`token.to(tl.int64) * Q_ROW`); k's is left 32-bit (`token * K_ROW`): under GQA k is
heads / kv_heads times smaller than q. Wrong once k holds 2**31 elements or more.

Class: addresses from a 32-bit product (docs/evaluator.md, `narrow_addresses`) where one
factor is a constant, on the input the wide shape keeps small. The rule allows a product
with a constant ("the wide shape runs it"); rope's wide shape (17, 32768, 32, 8, 128)
makes q wide (2.28e9 elements) and k 570M, under 2**31; the far-rows lap lays q's and
k's tokens and heads far apart, but the wrapper packs both, so it meets dense copies. Round 14's int32 k offsets
(`redteam14_rope_int32_k_offsets.py`) were a run-time `token * stride_k_tok`, which the
rule now refuses; with the stride a constexpr the same wrap passes it.

Wrong for a user: any model whose k passes 2**31 elements, e.g. a multi-head (no GQA)
model in pretraining: Llama 2 13B (40 heads of 128, kv_heads = heads) over a batch of
128 x 4096 tokens: k (128, 4096, 40, 128), 2.68e9 elements: from token 419,431 on
(`token * 5120` past 2**31) k is read from before its buffer and its rotated rows are
written there, while q (64-bit) is right.
"""
import torch
import triton
import triton.language as tl

HEADS_PER_PROGRAM = 1  # heads rotated by one program (a [heads, head_dim/2] tile)
NUM_WARPS = 1
PRECOMPUTED_TABLE = False  # read cos/sin from a cached fp32 table instead of computing
FUSED_QK = True  # rotate q and k in one launch that shares cos/sin per token

_THETA = 10000.0
_CACHE = {}  # (kind, ..., device) -> tensors built once per process


@triton.jit
def _angles_cos_sin(pos, freqs, fmask, freq_hi_ptr, freq_lo_ptr):
    # angle = pos * inv_freq in float-float: inv_freq = hi + lo, and the fma recovers
    # the rounding error of pos * hi, so large positions keep full fp32 accuracy
    hi = tl.load(freq_hi_ptr + freqs, mask=fmask, other=0.0)
    lo = tl.load(freq_lo_ptr + freqs, mask=fmask, other=0.0)
    p = pos.to(tl.float32)  # exact for positions below 2**24
    angle = p * hi
    err = tl.fma(p, hi, -angle) + p * lo
    # reduce to [-pi, pi] with 2*pi split in two fp32 parts (Cody-Waite)
    turns = tl.floor(angle * 0.15915494309189535 + 0.5)
    r = tl.fma(-turns, 6.2831854820251465, angle)
    r = tl.fma(-turns, -1.7484555314695172e-07, r) + err
    return tl.cos(r), tl.sin(r)


@triton.jit
def _cos_sin(pos, freqs, fmask, freq_hi_ptr, freq_lo_ptr, cos_ptr, sin_ptr, half, table_len,
             USE_TABLE: tl.constexpr):
    if USE_TABLE:
        if (pos >= 0) & (pos < table_len):
            row = pos.to(tl.int64) * half
            cos = tl.load(cos_ptr + row + freqs, mask=fmask, other=1.0)
            sin = tl.load(sin_ptr + row + freqs, mask=fmask, other=0.0)
        else:
            cos, sin = _angles_cos_sin(pos, freqs, fmask, freq_hi_ptr, freq_lo_ptr)
    else:
        cos, sin = _angles_cos_sin(pos, freqs, fmask, freq_hi_ptr, freq_lo_ptr)
    return cos, sin


@triton.jit
def _rotate_heads(out_ptr, x_ptr, token, heads, n_heads, half, freqs, fmask, cos, sin,
                  ROW: tl.constexpr, HEAD_D: tl.constexpr):
    # x packed [tokens, heads, HEAD_D]: a token's row is ROW = heads * HEAD_D elements
    offs = token * ROW + heads[:, None] * HEAD_D + freqs[None, :]
    mask = (heads[:, None] < n_heads) & fmask[None, :]
    x1 = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + offs + half, mask=mask, other=0.0).to(tl.float32)
    c = cos[None, :]
    s = sin[None, :]
    tl.store(out_ptr + offs, (x1 * c - x2 * s).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + offs + half, (x2 * c + x1 * s).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rope_kernel(qo_ptr, q_ptr, ko_ptr, k_ptr, pos_ptr, freq_hi_ptr, freq_lo_ptr,
                cos_ptr, sin_ptr, n_q_heads, n_k_heads, half, table_len,
                Q_ROW: tl.constexpr, K_ROW: tl.constexpr, HEAD_D: tl.constexpr,
                HEADS: tl.constexpr, BLOCK_D: tl.constexpr, USE_TABLE: tl.constexpr,
                DO_Q: tl.constexpr, DO_K: tl.constexpr):
    token = tl.program_id(0)
    heads = tl.program_id(1) * HEADS + tl.arange(0, HEADS)
    pos = tl.load(pos_ptr + token)
    freqs = tl.arange(0, BLOCK_D)
    fmask = freqs < half
    cos, sin = _cos_sin(pos, freqs, fmask, freq_hi_ptr, freq_lo_ptr, cos_ptr, sin_ptr, half,
                        table_len, USE_TABLE)
    if DO_Q:
        # q is the large one (heads x head_dim a token): 64-bit token offsets
        _rotate_heads(qo_ptr, q_ptr, token.to(tl.int64), heads, n_q_heads, half, freqs, fmask,
                      cos, sin, Q_ROW, HEAD_D)
    if DO_K:
        # k has kv_heads <= heads: its token offsets stay 32-bit
        _rotate_heads(ko_ptr, k_ptr, token, heads, n_k_heads, half, freqs, fmask, cos, sin,
                      K_ROW, HEAD_D)


def _inv_freq(head_dim, device):
    """inv_freq as an fp32 hi/lo pair, computed in float64 once per (head_dim, device)."""
    key = ("inv_freq", head_dim, str(device))
    if key not in _CACHE:
        exponent = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
        inv = 1.0 / (_THETA ** exponent)
        hi = inv.float()
        lo = (inv - hi.double()).float()
        _CACHE[key] = (hi.to(device), lo.to(device), inv)
    return _CACHE[key]


def _table(seq, head_dim, device):
    """fp32 cos/sin rows for positions 0..table_len-1, cached by (length, head_dim, device)."""
    table_len = 2 * triton.next_power_of_2(max(seq, 2048))
    key = ("table", table_len, head_dim, str(device))
    if key not in _CACHE:
        inv = _inv_freq(head_dim, device)[2]
        angles = torch.arange(table_len, dtype=torch.float64)[:, None] * inv[None, :]
        _CACHE[key] = (torch.cos(angles).float().to(device), torch.sin(angles).float().to(device))
    return (*_CACHE[key], table_len)


def run(q, k, positions):
    batch, seq, n_q_heads, head_dim = q.shape
    if k.dim() != 4 or k.shape[:2] != q.shape[:2] or k.shape[3] != head_dim:
        raise ValueError(f"k {tuple(k.shape)} does not match q {tuple(q.shape)}")
    if head_dim % 2:
        raise ValueError(f"head_dim {head_dim} must be even for rotate-half RoPE")
    if tuple(positions.shape) != (batch, seq):
        raise ValueError(f"positions {tuple(positions.shape)} != (batch, seq) {(batch, seq)}")
    n_k_heads = k.shape[2]
    q = q.contiguous()
    k = k.contiguous()
    positions = positions.to(torch.int32).contiguous()
    q_out = torch.empty_like(q)
    k_out = torch.empty_like(k)
    half = head_dim // 2
    freq_hi, freq_lo, _ = _inv_freq(head_dim, q.device)
    if PRECOMPUTED_TABLE:
        cos, sin, table_len = _table(seq, head_dim, q.device)
    else:
        cos, sin, table_len = freq_hi, freq_lo, 0  # never read
    tokens = batch * seq
    heads = min(HEADS_PER_PROGRAM, triton.next_power_of_2(max(n_q_heads, n_k_heads)))
    common = dict(Q_ROW=n_q_heads * head_dim, K_ROW=n_k_heads * head_dim, HEAD_D=head_dim,
                  HEADS=heads, BLOCK_D=triton.next_power_of_2(half), USE_TABLE=PRECOMPUTED_TABLE,
                  num_warps=NUM_WARPS)
    args = (q_out, q, k_out, k, positions, freq_hi, freq_lo, cos, sin, n_q_heads, n_k_heads,
            half, table_len)
    if FUSED_QK:
        grid = (tokens, triton.cdiv(max(n_q_heads, n_k_heads), heads))
        rope_kernel[grid](*args, DO_Q=True, DO_K=True, **common)
    else:
        rope_kernel[(tokens, triton.cdiv(n_q_heads, heads))](*args, DO_Q=True, DO_K=False,
                                                              **common)
        rope_kernel[(tokens, triton.cdiv(n_k_heads, heads))](*args, DO_Q=False, DO_K=True,
                                                              **common)
    return q_out, k_out
